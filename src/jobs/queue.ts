// The durable job queue: a PostgreSQL table (jobs) written in the transaction of the change that
// needs the work, claimed with FOR UPDATE SKIP LOCKED under a lease, one job at a time per ordering
// key, and announced with NOTIFY so idle workers wake at once. Plain functions taking db first.
import { sql, type OperationNodeSource } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.js';
import type { JobRow } from '../db/schema.js';

/** The NOTIFY channel; the payload is the queue's name. */
export const JOBS_CHANNEL = 'sf_jobs';

export interface NewJob {
  workspaceId: string;
  queue: string;
  /** Jobs with the same key run one at a time, oldest (createdAt, then id) first. */
  orderingKey?: string | undefined;
  payload: Record<string, unknown>;
  /** Not before this instant (default: now). */
  runAt?: Date | undefined;
  /** Its place in its key's order (default: now); give the time of the change it belongs to. */
  createdAt?: Date | undefined;
}

export type Job = JobRow;

/** A query builder, embedded in a statement as it is (the UPDATE of a job's effect). */
type Compilable = OperationNodeSource;

/**
 * Adds a job and notifies the workers, in one statement. Call it with the transaction of the change
 * that needs the job: both commit or neither does, and NOTIFY is delivered at commit.
 */
export async function enqueueJob(db: Db, job: NewJob): Promise<string> {
  const id = uuidv7();
  const now = new Date();
  await sql`
    with added as (
      insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      values (${job.workspaceId}::uuid, ${id}::uuid, ${job.queue}, ${job.orderingKey ?? null}, ${JSON.stringify(job.payload)}::jsonb,
              ${job.runAt ?? now}::timestamptz, ${job.createdAt ?? now}::timestamptz)
      returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue) from added`.execute(db);
  return id;
}

/**
 * Adds a job, as enqueueJob does, only when `when` (a select) finds a row: the check and the insert
 * are one statement, so the job follows the state it was decided on within the caller's transaction.
 * Undefined when nothing was added.
 */
export async function enqueueJobWhen(db: Db, job: NewJob, when: Compilable): Promise<string | undefined> {
  const id = uuidv7();
  const now = new Date();
  const result = await sql<{ queue: string }>`
    with added as (
      insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
      select ${job.workspaceId}::uuid, ${id}::uuid, ${job.queue}, ${job.orderingKey ?? null}, ${JSON.stringify(job.payload)}::jsonb,
             ${job.runAt ?? now}::timestamptz, ${job.createdAt ?? now}::timestamptz
       where exists (${when})
      returning queue
    )
    select pg_notify(${JOBS_CHANNEL}, queue), queue from added`.execute(db);
  return result.rows.length > 0 ? id : undefined;
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

/**
 * Claims up to `limit` due jobs of `queue` for `workerId` until `leaseMs` from now, and counts the
 * attempt. A job is due when its run_at has passed, nobody holds it (or its lease ran out), and no
 * earlier job of its ordering key is still there (unfinished jobs stay in the table, finished ones
 * are deleted) nor held: so a key's jobs run one at a time, in order, across every instance.
 * SKIP LOCKED lets concurrent claimers pass over each other's rows instead of waiting. With
 * `groups`, only the first due jobs (GROUP_WINDOW or 4 x limit) are considered, each group's
 * within its allowance.
 *
 * The due jobs are read in jobs_due_idx's order, so a claim reads about `limit` rows whatever the
 * backlog. The planner is told so (bitmap and sequential scans off for this statement's
 * transaction): with no or stale statistics on jobs (a fresh table, a burst before autovacuum's
 * ANALYZE, or autovacuum off) it otherwise estimates a few dozen rows and chooses a bitmap scan of
 * every due job plus a sort, 15-30 ms a claim at a 10,000-job backlog against under 1 ms, and a
 * bitmap scan never marks the dead index entries of finished jobs, so they stay in the way.
 */
export async function claimJobs(
  db: Db,
  options: { queue: string; workerId: string; limit: number; leaseMs: number; groups?: ClaimGroups | undefined },
): Promise<Job[]> {
  const due = sql`
         j.queue = ${options.queue}
         and j.run_at <= now()
         and (j.locked_until is null or j.locked_until < now())
         and (j.ordering_key is null or not exists (
               select 1
                 from jobs e
                where e.queue = j.queue
                  and e.ordering_key = j.ordering_key
                  and e.id <> j.id
                  and ((e.created_at, e.id) < (j.created_at, j.id) or e.locked_until >= now())))`;
  const groups = options.groups;
  const picked = groups
    ? sql`
    with candidates as materialized (
      select j.workspace_id, j.id, j.run_at, j.created_at,
             row_number() over (partition by j.payload ->> ${groups.field} order by j.run_at, j.created_at, j.id) as rank,
             coalesce((${JSON.stringify(groups.allowance)}::jsonb ->> (j.payload ->> ${groups.field}))::int, ${groups.otherwise}) as allowed
        from (select j.* from jobs j where ${due}
               order by j.run_at, j.created_at, j.id
               limit ${Math.max(GROUP_WINDOW, 4 * options.limit)}) j
    ), picked as (
      select j.workspace_id, j.id
        from candidates c
        join jobs j on j.workspace_id = c.workspace_id and j.id = c.id
       where c.rank <= c.allowed
         and ${due}
       order by c.run_at, c.created_at, c.id
       limit ${options.limit}
       for update of j skip locked
    )`
    : sql`
    with picked as (
      select j.workspace_id, j.id
        from jobs j
       where ${due}
       order by j.run_at, j.created_at, j.id
       limit ${options.limit}
       for update of j skip locked
    )`;
  return db.transaction().execute(async (trx) => {
    await sql`select set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`.execute(trx);
    const result = await sql<Job>`
    ${picked}
    update jobs
       set locked_by = ${options.workerId},
           locked_until = now() + ${options.leaseMs} * interval '1 millisecond',
           attempts = jobs.attempts + 1
      from picked
     where jobs.workspace_id = picked.workspace_id
       and jobs.id = picked.id
    returning jobs.*`.execute(trx);
    return result.rows;
  });
}

const held = (job: Job) => sql`workspace_id = ${job.workspace_id} and id = ${job.id} and locked_by = ${job.locked_by}`;

/** Deletes a finished job, if this claim still holds it; use the transaction that records its effect. */
export async function finishJob(db: Db, job: Job): Promise<boolean> {
  const result = await sql`delete from jobs where ${held(job)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/**
 * Runs `effect` (a data-modifying query, not executed yet) and deletes the job, in one statement:
 * the job's outcome and its deletion commit together, in one round trip. True when this claim
 * still held the job.
 */
export async function finishJobWith(db: Db, job: Job, effect: Compilable): Promise<boolean> {
  const result = await sql<{ finished: boolean }>`
    with effect as (${effect}),
         done as (delete from jobs where ${held(job)} returning 1)
    select exists (select 1 from done) as finished`.execute(db);
  return result.rows[0]?.finished ?? false;
}

/** Puts a failed job back to run again at `runAt`, keeping its error. */
export async function retryJob(db: Db, job: Job, runAt: Date, error: string): Promise<void> {
  await sql`
    update jobs set run_at = ${runAt}::timestamptz, locked_by = null, locked_until = null, last_error = ${error}
     where ${held(job)}`.execute(db);
}

/** Gives a claimed job back untried (the process is stopping): the attempt does not count. */
export async function releaseJob(db: Db, job: Job): Promise<void> {
  await sql`
    update jobs set locked_by = null, locked_until = null, attempts = greatest(attempts - 1, 0)
     where ${held(job)}`.execute(db);
}

/** Gives a claimed job back untried, to run again at `runAt`: the attempt does not count. */
export async function postponeJob(db: Db, job: Job, runAt: Date): Promise<void> {
  await sql`
    update jobs set run_at = ${runAt}::timestamptz, locked_by = null, locked_until = null, attempts = greatest(attempts - 1, 0)
     where ${held(job)}`.execute(db);
}

/**
 * When the next job of `queue` that waits for a retry becomes due; undefined when none does. (Jobs
 * due now but blocked behind their key are claimed when the job ahead finishes; an expired lease
 * is found by the next poll.)
 */
export async function nextRetryAt(db: Db, queue: string): Promise<Date | undefined> {
  const result = await sql<{ at: Date | null }>`
    select min(run_at) as at from jobs where queue = ${queue} and run_at > now()`.execute(db);
  return result.rows[0]?.at ?? undefined;
}
