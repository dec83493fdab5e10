// The durable job queue: a PostgreSQL table (jobs) written in the transaction of the change that
// needs the work, claimed with FOR UPDATE SKIP LOCKED under a short lease that its worker renews
// while the job runs, one job at a time per ordering key, and announced with NOTIFY so idle workers
// wake at once. The only module that reads or writes jobs or sends its NOTIFY: other rooms add jobs
// with enqueue, or embed its statement builders in their own statements, and name existing jobs
// by a JobKey (kind, ordering key, payload fields), never by the table. Plain functions taking db first.
import { CompiledQuery, sql, type OperationNodeSource, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.js';
import type { JobRow } from '../db/schema.js';
import type { JobKind, JobPayloads, PayloadOf } from './kinds.js';

/** The NOTIFY channel; the payload is the queue's name. */
export const JOBS_CHANNEL = 'sf_jobs';

/** Where a job runs: its workspace, its order, its time. */
export interface JobOptions {
  workspaceId: string;
  /** Jobs with the same key run one at a time, oldest (createdAt, then id) first. */
  orderingKey?: string | undefined;
  /** Not before this instant (default: now). */
  runAt?: Date | undefined;
  /** Its place in its key's order (default: now); give the time of the change it belongs to. */
  createdAt?: Date | undefined;
}

export interface NewJob<Q extends string = string> extends JobOptions {
  queue: Q;
  payload: PayloadOf<Q>;
}

/**
 * A claimed job of queue `Q`, its payload typed by the registry (kinds.ts); `prefetched` is what
 * its handler's prefetch read with the claim (claimJobs), null when that found no row.
 */
export type Job<Q extends string = string> = Omit<JobRow, 'queue' | 'payload'> & { queue: Q; payload: PayloadOf<Q>; prefetched?: unknown };

/** What the queue needs of a claimed job to end or move it: the claim that holds it. */
export type HeldJob = Pick<JobRow, 'workspace_id' | 'id' | 'locked_by'>;

/** A query builder, embedded in a statement as it is (the UPDATE of a job's effect). */
type Compilable = OperationNodeSource;

/** The job's row, while the claim `job` came from still holds it (not released, not taken after its lease ran out). */
const held = (job: HeldJob) => sql`jobs.workspace_id = ${job.workspace_id} and jobs.id = ${job.id} and jobs.locked_by = ${job.locked_by}`;

/** A job nobody runs now: never claimed, put back, or its lease ran out. */
const waiting = sql`(jobs.locked_until is null or jobs.locked_until < now())`;

/**
 * Adds a job and notifies the workers, in one statement. Call it with the transaction of the change
 * that needs the job: both commit or neither does, and NOTIFY is delivered at commit. A registered
 * kind's job is added with enqueue, which names the kind; this form also takes queues outside the
 * registry (tests, the bench), and still checks a registered queue's payload against its type.
 */
export async function enqueueJob<Q extends string>(db: Db, job: NewJob<Q>): Promise<string> {
  const id = uuidv7();
  await addJobQuery(id, job).execute(db);
  return id;
}

/** The statement adding the job `id` and notifying its workers. */
function addJobQuery<Q extends string>(id: string, job: NewJob<Q>): RawBuilder<unknown> {
  const now = new Date();
  return sql`
    with added as (
      insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      values (${job.workspaceId}::uuid, ${id}::uuid, ${job.queue}, ${job.orderingKey ?? null}, ${JSON.stringify(job.payload)}::jsonb,
              ${job.runAt ?? now}::timestamptz, ${job.createdAt ?? now}::timestamptz)
      returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue) from added`;
}

/** Adds a job of `kind` with its payload (enqueueJob); in the transaction of the change that needs it. */
export function enqueue<K extends JobKind>(db: Db, kind: K, payload: JobPayloads[K], options: JobOptions): Promise<string> {
  return enqueueJob<JobKind>(db, { ...options, queue: kind, payload });
}

/**
 * Statement builder: enqueue's statement, to run as the caller likes (with its transaction's next
 * statement or COMMIT: db/pg-driver.ts runAtCommit).
 */
export function enqueueQuery<K extends JobKind>(kind: K, payload: JobPayloads[K], options: JobOptions): RawBuilder<unknown> {
  return addJobQuery<JobKind>(uuidv7(), { ...options, queue: kind, payload });
}

/**
 * Adds a job of `kind`, as enqueue does, only when `when` (a select) finds a row: the check and the
 * insert are one statement, so the job follows the state it was decided on within the caller's
 * transaction. Undefined when nothing was added.
 */
export async function enqueueWhen<K extends JobKind>(
  db: Db,
  kind: K,
  payload: JobPayloads[K],
  options: JobOptions,
  when: Compilable,
): Promise<string | undefined> {
  const id = uuidv7();
  const now = new Date();
  const result = await sql<{ queue: string }>`
    with added as (
      insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      select ${options.workspaceId}::uuid, ${id}::uuid, ${kind}, ${options.orderingKey ?? null}, ${JSON.stringify(payload)}::jsonb,
             ${options.runAt ?? now}::timestamptz, ${options.createdAt ?? now}::timestamptz
       where exists (${when})
      returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue), queue from added`.execute(db);
  return result.rows.length > 0 ? id : undefined;
}

/** A UUIDv7 made by PostgreSQL (time-ordered like the service's own ids), for the jobs a statement fans out. */
const NEW_JOB_ID = sql.raw(
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`,
);

/** Each payload field of a job kind as an SQL expression of the statement that adds the jobs. */
export type PayloadColumns<P> = { [F in keyof P]: RawBuilder<unknown> };

/**
 * Statement builder: the INSERT of one job of `kind` per row of `from` (a FROM item of the caller's
 * statement, typically one of its WITH queries), to embed as a WITH query of that statement
 * (`name as (${enqueueEachQuery(...)})`, returning a row per job added), so the jobs commit with
 * whatever made their rows. `id` and the payload's fields are expressions over `from`; the payload's
 * fields are those of the kind's registered type. Pair it with notifyAddedQuery in the same statement.
 */
export function enqueueEachQuery<K extends JobKind>(
  kind: K,
  job: {
    workspaceId: string;
    from: RawBuilder<unknown>;
    /** An expression over `from`; by default a new UUIDv7 made by PostgreSQL. */
    id?: RawBuilder<unknown>;
    payload: PayloadColumns<JobPayloads[K]>;
    /** An instant, or an SQL expression over `from` (a timer's due time). */
    runAt: Date | RawBuilder<unknown>;
    createdAt: Date | RawBuilder<unknown>;
    /** An SQL expression over `from` (text); none by default. */
    orderingKey?: RawBuilder<unknown>;
  },
): RawBuilder<unknown> {
  const fields = Object.entries(job.payload as Record<string, RawBuilder<unknown>>).map(([name, value]) => sql`${sql.lit(name)}, ${value}`);
  return sql`insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      select ${job.workspaceId}::uuid, ${job.id ?? NEW_JOB_ID}, ${kind}, ${job.orderingKey ?? null}::text, jsonb_build_object(${sql.join(fields)}),
             ${job.runAt}::timestamptz, ${job.createdAt}::timestamptz
        from ${job.from}
      returning 1`;
}

/**
 * A job's key: which of a kind's jobs a caller means when it cancels, finds or replaces jobs, as
 * graphile-worker's `job_key` names one, so that no other room reads the queue's table: the
 * ordering key and/or fields of the payload, each an SQL expression of the caller's statement (or
 * a value). Every part given must match.
 */
export interface JobKey<K extends JobKind> {
  orderingKey?: RawBuilder<unknown> | string;
  payload?: { [F in keyof JobPayloads[K]]?: RawBuilder<unknown> | string };
}

/** The condition (over `jobs`) that a job is `kind`'s, of the workspace, with `key`. */
function keyed<K extends JobKind>(kind: K, workspaceId: string, key: JobKey<K>): RawBuilder<unknown> {
  const parts = [sql`jobs.queue = ${kind}`, sql`jobs.workspace_id = ${workspaceId}::uuid`];
  if (key.orderingKey !== undefined) parts.push(sql`jobs.ordering_key = ${key.orderingKey}::text`);
  for (const [field, value] of Object.entries(key.payload ?? {}) as Array<[string, RawBuilder<unknown> | string]>) {
    parts.push(sql`jobs.payload->>${sql.lit(field)} = ${value}::text`);
  }
  return sql.join(parts, sql` and `);
}

/**
 * Statement builder: the DELETE of `kind`'s waiting jobs (nobody runs them now) with `key`, to
 * embed as a WITH query: jobs that a change makes pointless (a timer whose silence ended) go with
 * that change. A running one stays; its handler must see for itself that its reason is gone.
 */
export function cancelWaitingQuery<K extends JobKind>(kind: K, workspaceId: string, key: JobKey<K>): RawBuilder<unknown> {
  return sql`delete from jobs where ${keyed(kind, workspaceId, key)} and ${waiting} returning 1`;
}

/**
 * Statement builder: the one job of `kind` under ordering key `orderingKey` (a thread's SLA timer,
 * which each change of its clocks moves) set to run at `runAt`, as WITH queries of the change's
 * statement: the key's job moved there (waiting or running: a running one's handler computes its
 * next time itself, under a lock the change holds until it commits), or, when the key has none,
 * added with `payload`. `fresh`: the key is new (its thread opened in this transaction), nothing to
 * move, the job is only added. The WITH query `name` has a row per job moved or added, for
 * notifyAddedQuery.
 */
export function placeKeyedJobQueries<K extends JobKind>(
  kind: K,
  name: string,
  job: { workspaceId: string; orderingKey: string; payload: JobPayloads[K]; runAt: Date; fresh?: boolean },
): RawBuilder<unknown>[] {
  const now = new Date();
  const values = sql`${job.workspaceId}::uuid, ${uuidv7()}::uuid, ${kind}, ${job.orderingKey}::text, ${JSON.stringify(job.payload)}::jsonb,
             ${job.runAt}::timestamptz, ${now}::timestamptz`;
  const columns = sql`jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)`;
  if (job.fresh) return [sql`${sql.ref(name)} as (insert into ${columns} values (${values}) returning 1)`];
  const moved = sql.ref(`${name}_moved`);
  const added = sql.ref(`${name}_added`);
  return [
    sql`${moved} as (update jobs set run_at = ${job.runAt}::timestamptz where ${keyed(kind, job.workspaceId, { orderingKey: job.orderingKey })} returning 1)`,
    sql`${added} as (insert into ${columns} select ${values} where not exists (select 1 from ${moved}) returning 1)`,
    sql`${sql.ref(name)} as (select 1 from ${moved} union all select 1 from ${added})`,
  ];
}

/**
 * Statement builder: a select of one row per job of `kind` with `key`, waiting or running, for
 * `exists (...)` in the caller's statement.
 */
export function queuedJobsQuery<K extends JobKind>(kind: K, workspaceId: string, key: JobKey<K>): RawBuilder<unknown> {
  return sql`select 1 from jobs where ${keyed(kind, workspaceId, key)}`;
}

/**
 * Statement builder: a select of one row per job of `kind` with `key` that runs now (claimed, its
 * lease not run out), for `exists (...)` in the caller's statement.
 */
export function runningJobsQuery<K extends JobKind>(kind: K, workspaceId: string, key: JobKey<K>): RawBuilder<unknown> {
  return sql`select 1 from jobs where ${keyed(kind, workspaceId, key)} and jobs.locked_until >= now()`;
}

/**
 * The longest an idle worker sleeps between two claims (worker.ts caps every nap at it; JOB_POLL_MS
 * is at most this). Each claim also answers when the queue's next waiting job falls due, and the
 * worker sleeps no longer than that: a job committed more than this before it falls due is seen by
 * a claim of every worker of its kind before then, and run on time without a NOTIFY.
 */
export const LONGEST_NAP_MS = 60_000;

/**
 * Whether a job due at `runAt`, added now, needs its workers woken (notifyAddedQuery): it falls due
 * within two LONGEST_NAP_MS (one for a nap begun before its commit, one for the commit itself), so
 * a worker asleep might only claim after it. A job due later is found by the claims in between.
 */
export function wakeFor(runAt: Date, now: number = Date.now()): boolean {
  return runAt.getTime() - now <= 2 * LONGEST_NAP_MS;
}

/**
 * Statement builder: a scalar subquery that wakes `kind`'s workers (NOTIFY, at commit) when the WITH
 * query `added` (an enqueueEachQuery) added any job, and does nothing when it added none.
 */
export function notifyAddedQuery(kind: JobKind, added: string): RawBuilder<unknown> {
  return sql`(select pg_notify(${JOBS_CHANNEL}, ${kind}) from (select 1 from ${sql.table(added)} limit 1) as added)`;
}

/**
 * A per-group allowance for a claim: jobs are grouped by `payload->>field`, and at most
 * `allowance[group]` (else `otherwise`) of a group's due jobs are claimed, the first in claim order.
 * Jobs over it stay in the queue, untouched, for a later claim (or another instance): the claimer
 * says what it can run instead of claiming what it would only put back.
 */
export interface ClaimGroups {
  field: string;
  allowance: Record<string, number>;
  otherwise: number;
}

/** How many due jobs, at least, a grouped claim looks at to pick its jobs from. */
const GROUP_WINDOW = 256;

/** What a claim took, and what the claimer needs to know to sleep until there is more. */
export interface Claim<Q extends string = string> {
  jobs: Job<Q>[];
  /** When the queue's next job that waits (a retry, a delayed job) falls due; undefined when none does. */
  nextRunAt: Date | undefined;
  /** True when due jobs were left in the queue by a group's allowance or past the claim's window: they want a claim as soon as a slot frees. */
  leftBehind: boolean;
}

/** A claimed job as SQL expressions of the claim's statement, for a prefetch (ClaimOptions). */
export interface ClaimedJobColumns {
  workspaceId: RawBuilder<unknown>;
  /** A field of its payload, as text. */
  payload(field: string): RawBuilder<unknown>;
}

/**
 * What a claimer reads with each job it claims, in the claim's own statement: a select over the
 * claimed job's columns (one row or none) whose one column `prefetched` (json) becomes the job's
 * `prefetched`. It runs as a subquery of the select list, once per claimed job on its keys' indexes
 * (as a LATERAL join the planner, with no statistics, joined it to whole tables: 100 ms a claim). The webhook worker reads its delivery, endpoint and event so:
 * one round trip for the claim and the reads of the jobs it hands over, instead of one more per job.
 * No row (null) does not mean gone: claim_jobs, a volatile function, takes jobs committed after the
 * statement's snapshot, which the prefetch reads with; the handler reads such a job's rows itself.
 */
export type Prefetch = (job: ClaimedJobColumns) => RawBuilder<unknown>;

const CLAIMED: ClaimedJobColumns = {
  workspaceId: sql`(c.job).workspace_id`,
  payload: (field) => sql`((c.job).payload ->> ${sql.lit(field)})`,
};

/**
 * Claims up to `limit` due jobs of `queue` for `workerId` until `leaseMs` from now, and counts the
 * attempt, in one statement (the claim_jobs function of migration 0008, which says what is due and
 * why the planner is told to read jobs_due_idx in order; PL/pgSQL since 0033, so that each
 * connection plans it once). A key's jobs run one at a time, in order,
 * across every instance; SKIP LOCKED lets concurrent claimers pass over each other's rows. Only the
 * first `limit` due jobs are considered or, with `groups`, the first GROUP_WINDOW (or 4 x limit),
 * each group's within its allowance: finding a due job can mean passing over many that wait behind
 * their key, so the window is no larger than it needs to be. The same statement says when the next
 * waiting job falls due and whether due jobs were left behind, so an idle claimer knows how long it
 * may sleep without asking again; with `prefetch`, it also reads what each job's run needs.
 */
export async function claimJobs<Q extends string>(
  db: Db,
  options: {
    queue: Q;
    workerId: string;
    limit: number;
    leaseMs: number;
    groups?: ClaimGroups | undefined;
    prefetch?: Prefetch | undefined;
    carry?: CarriedWrites | undefined;
  },
): Promise<Claim<Q>> {
  const { groups, prefetch, carry } = options;
  // One row per claimed job, or a single row with a null job when none was: the look-ahead comes either way.
  // Rows of `queue` hold the payloads enqueued for it, of its registered type: typed here, not re-validated.
  const result = await db.executeQuery<Job<Q> & { next_run_at: Date | null; left_behind: boolean; prefetched?: unknown }>(
    CompiledQuery.raw(claimText(db, prefetch, carry?.sql), [
      options.queue,
      options.workerId,
      options.limit,
      Math.round(options.leaseMs),
      groups?.field ?? null,
      groups ? JSON.stringify(groups.allowance) : null,
      groups?.otherwise ?? options.limit,
      groups ? Math.max(GROUP_WINDOW, 4 * options.limit) : options.limit,
      ...(carry?.parameters ?? []),
    ]),
  );
  const first = result.rows[0];
  const jobs = result.rows.filter((row) => row.id !== null).map(({ next_run_at: _next, left_behind: _left, ...job }) => job);
  return { jobs, nextRunAt: first?.next_run_at ?? undefined, leftBehind: first?.left_behind ?? false };
}

/** The parameters of the claim's own text ($1-$8): a carried statement's are numbered after them. */
export const CLAIM_PARAMETERS = 8;

/**
 * Writes that travel in a claim's statement, before it, as its WITH queries (data-modifying ones:
 * `name as (update ...), ...`), their parameters numbered from $9 (CLAIM_PARAMETERS + 1): what a
 * worker has waiting to be written (outcomes gathered to be recorded together) costs no round trip
 * of its own while claims keep coming. They commit with the claim, or fail with it. The text is
 * fixed (one prepared statement per text); its values are `parameters`.
 */
export interface CarriedWrites {
  sql: string;
  parameters: readonly unknown[];
}

/**
 * The claim's fixed text, with a prefetch's select compiled into it once and a carried statement's
 * WITH queries before it: a worker claims many times a second under load, and building the
 * statement each time showed in its profile. $1 queue, $2 worker, $3 limit, $4 lease (ms), $5 group
 * field, $6 allowances, $7 otherwise, $8 window; then the carried statement's.
 */
function claimText(db: Db, prefetch: Prefetch | undefined, carried: string | undefined): string {
  const key = prefetch ?? PLAIN;
  let texts = claimTexts.get(key);
  if (texts === undefined) {
    let prefetched = '';
    if (prefetch) {
      const select = prefetch(CLAIMED).compile(db);
      // A prefetch reads the claimed job's columns only: a value of its own would need a parameter per claim.
      if (select.parameters.length > 0) throw new Error('a prefetch takes no parameters of its own');
      prefetched = `, case when (c.job).id is not null then (select p.prefetched from (${select.sql}) p limit 1) end as prefetched`;
    }
    claimTexts.set(key, (texts = new Map([['', claimSql(prefetched)]])));
  }
  let text = texts.get(carried ?? '');
  if (text === undefined) {
    text = `with ${carried}\n${texts.get('')!}`;
    texts.set(carried!, text);
  }
  return text;
}

const claimSql = (prefetched: string): string => `
    select (c.job).*, c.left_behind, c.next_run_at${prefetched}
      from claim_jobs($1::text, $2::text, $3::int, $4::int, $5::text, $6::jsonb, $7::int, $8::int) c`;

/** The claim's texts per prefetch (PLAIN: none), each by the carried statement's text ('' for none). */
const PLAIN: Prefetch = () => sql``;
const claimTexts = new WeakMap<Prefetch, Map<string, string>>();

/**
 * Extends the leases `workerId` still holds among `jobs` (its running jobs) to `leaseMs` from now,
 * in one statement, and says which it holds: a job missing from the answer was finished or put
 * back (by its own run), or taken by another instance after its lease ran out (the database was
 * out of reach for longer than the lease). A lease is short so that a dead process's jobs are
 * taken again soon; its live holder keeps it by calling this well within it.
 */
export async function renewLeases(db: Db, workerId: string, jobs: readonly HeldJob[], leaseMs: number): Promise<Set<string>> {
  if (jobs.length === 0) return new Set();
  const result = await sql<{ id: string }>`
    update jobs set locked_until = now() + ${Math.round(leaseMs)}::int * interval '1 millisecond'
      from unnest(${jobs.map((job) => job.workspace_id)}::uuid[], ${jobs.map((job) => job.id)}::uuid[]) as mine (workspace_id, id)
     where jobs.workspace_id = mine.workspace_id and jobs.id = mine.id and jobs.locked_by = ${workerId}
    returning jobs.id`.execute(db);
  return new Set(result.rows.map((row) => row.id));
}

/** Deletes a finished job, if this claim still holds it; use the transaction that records its effect. */
export async function finishJob(db: Db, job: HeldJob): Promise<boolean> {
  const result = await sql`delete from jobs where ${held(job)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** Deletes finished jobs, each if its claim still holds it, in one statement; how many went. */
export async function finishJobs(db: Db, jobs: readonly HeldJob[]): Promise<number> {
  if (jobs.length === 0) return 0;
  const result = await db.executeQuery(CompiledQuery.raw(finishJobsSql(1), finishJobsParameters(jobs)));
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * The fixed text of the deletion of finished jobs, each if its claim still holds it, its three
 * parameters numbered from `$first` (finishJobsParameters gives them): to run alone (finishJobs) or
 * as the main statement after the WITH list of a fixed statement that records their effects.
 */
export function finishJobsSql(first: number): string {
  return `delete from jobs
     using unnest($${first}::uuid[], $${first + 1}::uuid[], $${first + 2}::text[]) as held (workspace_id, id, locked_by)
     where jobs.workspace_id = held.workspace_id and jobs.id = held.id and jobs.locked_by = held.locked_by`;
}

/** The parameters of finishJobsSql, in order. */
export function finishJobsParameters(jobs: readonly HeldJob[]): unknown[] {
  return [jobs.map((job) => job.workspace_id), jobs.map((job) => job.id), jobs.map((job) => job.locked_by)];
}

/**
 * Statement builder: the deletion of a finished job, if this claim still holds it, to embed in the
 * statement that records its effect (as a WITH query, or as its main statement after its WITH list).
 */
export function finishJobQuery(job: HeldJob): RawBuilder<unknown> {
  return sql`delete from jobs where ${held(job)}`;
}

/**
 * The statement that deletes a finished job as its transaction's last one (runAtCommit sends it
 * with the COMMIT, no round trip of its own), and fails when this claim no longer holds the job (its
 * lease ran out and another instance took it): the error fails the commit, so the effects recorded
 * with it roll back and the new holder's run is the one that counts.
 */
export function finishHeldJobQuery(job: HeldJob): RawBuilder<unknown> {
  return sql`with finished as (delete from jobs where ${held(job)} returning 1)
    select 1 / (select count(*) from finished)::int as held`;
}

/**
 * Statement builder: a job's next step decided by its effect, as two WITH queries (`job_retried`,
 * `job_finished`) of the statement that records the effect. `retryAt` is an expression over `from`
 * (a WITH query of that statement with one row): a time puts the job back to run again then,
 * keeping `error`; null finishes it; no row leaves it held.
 */
export function retryOrFinishJobQueries(job: HeldJob, next: { from: RawBuilder<unknown>; retryAt: RawBuilder<unknown>; error: string }): RawBuilder<unknown> {
  return sql`job_retried as (
        update jobs set run_at = ${next.retryAt}, locked_by = null, locked_until = null, last_error = ${next.error}
          from ${next.from}
         where ${held(job)} and ${next.retryAt} is not null
      ), job_finished as (
        delete from jobs where ${held(job)} and exists (select 1 from ${next.from} where ${next.retryAt} is null)
      )`;
}

/** Puts a failed job back to run again at `runAt`, keeping its error. */
export async function retryJob(db: Db, job: HeldJob, runAt: Date, error: string): Promise<void> {
  await sql`
    update jobs set run_at = ${runAt}::timestamptz, locked_by = null, locked_until = null, last_error = ${error}
     where ${held(job)}`.execute(db);
}

/**
 * Puts a held job back to run again at `runAt` as new (no attempts, no error), and makes it the only
 * waiting job of its ordering key: a timer that re-arms itself in the transaction of its effect
 * (a thread's SLA timer), so that what it computed from the state it locked is what the queue holds.
 * Another waiting job of the key (added beside it while it ran, or by an older version of the
 * service, one per due time) goes: this one stands for it. Wakes the workers when `wake`. False when
 * the claim no longer holds the job.
 */
export async function rearmJob(db: Db, job: HeldJob & Pick<JobRow, 'queue' | 'ordering_key'>, runAt: Date, wake: boolean): Promise<boolean> {
  const { rows } = await sql<{ held: boolean }>`
    with others as (
      delete from jobs
       where jobs.workspace_id = ${job.workspace_id} and jobs.queue = ${job.queue} and jobs.ordering_key = ${job.ordering_key}
         and jobs.id <> ${job.id} and ${waiting}
    ), rearmed as (
      update jobs set run_at = ${runAt}::timestamptz, locked_by = null, locked_until = null, attempts = 0, last_error = null
       where ${held(job)}
      returning queue
    )
    select exists (select 1 from rearmed) as held,
           (select pg_notify(${JOBS_CHANNEL}, queue) from rearmed where ${wake}) as woken`.execute(db);
  return rows[0]?.held === true;
}

/** Gives a claimed job back untried (the process is stopping): the attempt does not count. */
export async function releaseJob(db: Db, job: HeldJob): Promise<void> {
  await sql`
    update jobs set locked_by = null, locked_until = null, attempts = greatest(attempts - 1, 0)
     where ${held(job)}`.execute(db);
}

/** Gives a claimed job back untried, to run again at `runAt`: the attempt does not count. */
export async function postponeJob(db: Db, job: HeldJob, runAt: Date): Promise<void> {
  await sql`
    update jobs set run_at = ${runAt}::timestamptz, locked_by = null, locked_until = null, attempts = greatest(attempts - 1, 0)
     where ${held(job)}`.execute(db);
}

/**
 * The other jobs of `job`'s queue and workspace whose payload has the same `field`, and whether
 * each is running now (claimed, its lease not run out).
 */
export async function otherJobsLike<Q extends string>(
  db: Db,
  job: Job<Q>,
  field: keyof PayloadOf<Q> & string,
): Promise<Array<{ id: string; running: boolean }>> {
  const value = String(job.payload[field]);
  const { rows } = await sql<{ id: string; running: boolean }>`
    select id, coalesce(locked_until > now(), false) as running from jobs
     where workspace_id = ${job.workspace_id} and queue = ${job.queue} and payload->>${field}::text = ${value} and id <> ${job.id}`.execute(db);
  return rows;
}

/** Makes the workspace's jobs `ids` due now and wakes their workers, in one statement. */
export async function runJobsNow(db: Db, workspaceId: string, ids: readonly string[]): Promise<void> {
  await sql`
    with due as (
      update jobs set run_at = now() where workspace_id = ${workspaceId} and id = any(${ids}::uuid[]) returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue) from due`.execute(db);
}

/**
 * Runs now the waiting jobs of `kind` in the workspace whose payload has `payload[field]`, or, when
 * none waits (none left, or its one is running), adds a job with `payload`; wakes the workers. One
 * statement; in the caller's transaction.
 */
export async function runNowOrEnqueue<K extends JobKind>(
  db: Db,
  kind: K,
  payload: JobPayloads[K],
  options: { workspaceId: string; field: keyof JobPayloads[K] & string; now: Date },
): Promise<void> {
  const { workspaceId, field, now } = options;
  const value = String(payload[field]);
  await sql`
    with moved as (
      update jobs set run_at = ${now}::timestamptz
       where workspace_id = ${workspaceId} and queue = ${kind} and payload->>${field}::text = ${value} and ${waiting}
      returning 1
    ), added as (
      insert into jobs (workspace_id, id, queue, payload, run_at, created_at)
      select ${workspaceId}::uuid, ${uuidv7()}::uuid, ${kind}, ${JSON.stringify(payload)}::jsonb, ${now}::timestamptz, ${now}::timestamptz
       where not exists (select 1 from moved)
    )
    select pg_notify(${JOBS_CHANNEL}, ${kind})`.execute(db);
}

/**
 * Adds a job with a fixed id unless it is there already (a recurring schedule's), and wakes the
 * workers when it was added: instances starting together add it once.
 */
export async function enqueueOnce<K extends JobKind>(db: Db, kind: K, id: string, payload: JobPayloads[K], options: JobOptions): Promise<boolean> {
  const now = new Date();
  const result = await sql`
    with added as (
      insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      values (${options.workspaceId}::uuid, ${id}::uuid, ${kind}, ${options.orderingKey ?? null}, ${JSON.stringify(payload)}::jsonb,
              ${options.runAt ?? now}::timestamptz, ${options.createdAt ?? now}::timestamptz)
      on conflict do nothing
      returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue) from added`.execute(db);
  return result.rows.length > 0;
}

/**
 * Moves a held job to run again `afterMs` from its transaction's start, as new (no attempts, no
 * error), instead of deleting it: a recurring job's end, in the transaction of its run's work.
 * False when the claim no longer holds it.
 */
export async function rescheduleJob(db: Db, job: HeldJob, afterMs: number, error: string | null = null): Promise<boolean> {
  const result = await sql`
    update jobs set run_at = now() + ${Math.round(afterMs)}::int * interval '1 millisecond',
                    locked_by = null, locked_until = null, attempts = 0, last_error = ${error}
     where ${held(job)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** One kind's queue as GET /metrics reports it. */
export interface QueueStats {
  kind: string;
  /** Every job of the kind: due, waiting for later, running. */
  queued: number;
  /** Due and not running (claim_jobs' "due", less the wait behind an ordering key). */
  due: number;
  /** How long the oldest of those has been due, in seconds; 0 when none is. */
  oldestDueAgeSeconds: number;
}

/** The queue's depth and lag per kind present in it, in one statement over jobs_due_idx (metrics, at scrape time). */
export async function queueStats(db: Db): Promise<QueueStats[]> {
  const result = await sql<{ kind: string; queued: number; due: number; oldest_due_age: number }>`
    select queue as kind, count(*)::int as queued,
           count(*) filter (where run_at <= now() and (locked_until is null or locked_until < now()))::int as due,
           coalesce(extract(epoch from now() - min(run_at) filter (where run_at <= now() and (locked_until is null or locked_until < now()))), 0)::float8 as oldest_due_age
      from jobs group by queue`.execute(db);
  return result.rows.map((row) => ({ kind: row.kind, queued: row.queued, due: row.due, oldestDueAgeSeconds: row.oldest_due_age }));
}
