// The durable job queue: a PostgreSQL table (jobs) written in the transaction of the change that
// needs the work, claimed with FOR UPDATE SKIP LOCKED under a short lease that its worker renews
// while the job runs, one job at a time per ordering key, and announced with NOTIFY so idle workers
// wake at once. Plain functions taking db first.
import { sql, type OperationNodeSource, type RawBuilder } from 'kysely';
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

/** What a claim took, and what the claimer needs to know to sleep until there is more. */
export interface Claim {
  jobs: Job[];
  /** When the queue's next job that waits (a retry, a delayed job) falls due; undefined when none does. */
  nextRunAt: Date | undefined;
  /** True when due jobs were left in the queue by a group's allowance or past the claim's window: they want a claim as soon as a slot frees. */
  leftBehind: boolean;
}

/**
 * Claims up to `limit` due jobs of `queue` for `workerId` until `leaseMs` from now, and counts the
 * attempt, in one statement (the claim_jobs function of migration 0008, which says what is due and
 * why the planner is told to read jobs_due_idx in order). A key's jobs run one at a time, in order,
 * across every instance; SKIP LOCKED lets concurrent claimers pass over each other's rows. Only the
 * first `limit` due jobs are considered or, with `groups`, the first GROUP_WINDOW (or 4 x limit),
 * each group's within its allowance: finding a due job can mean passing over many that wait behind
 * their key, so the window is no larger than it needs to be. The same statement says when the next
 * waiting job falls due and whether due jobs were left behind, so an idle claimer knows how long it
 * may sleep without asking again.
 */
export async function claimJobs(
  db: Db,
  options: { queue: string; workerId: string; limit: number; leaseMs: number; groups?: ClaimGroups | undefined },
): Promise<Claim> {
  const { groups } = options;
  // One row per claimed job, or a single row with a null job when none was: the look-ahead comes either way.
  const result = await sql<Job & { next_run_at: Date | null; left_behind: boolean }>`
    select (c.job).*, c.left_behind, c.next_run_at
      from claim_jobs(${options.queue}::text, ${options.workerId}::text, ${options.limit}::int, ${Math.round(options.leaseMs)}::int,
                      ${groups?.field ?? null}::text, ${groups ? JSON.stringify(groups.allowance) : null}::jsonb,
                      ${groups?.otherwise ?? options.limit}::int, ${groups ? Math.max(GROUP_WINDOW, 4 * options.limit) : options.limit}::int) c`.execute(db);
  const first = result.rows[0];
  const jobs = result.rows.filter((row) => row.id !== null).map(({ next_run_at: _next, left_behind: _left, ...job }) => job as Job);
  return { jobs, nextRunAt: first?.next_run_at ?? undefined, leftBehind: first?.left_behind ?? false };
}

/**
 * Extends the leases `workerId` still holds among `jobs` (its running jobs) to `leaseMs` from now,
 * in one statement, and says which it holds: a job missing from the answer was finished or put
 * back (by its own run), or taken by another instance after its lease ran out (the database was
 * out of reach for longer than the lease). A lease is short so that a dead process's jobs are
 * taken again soon; its live holder keeps it by calling this well within it.
 */
export async function renewLeases(db: Db, workerId: string, jobs: readonly Job[], leaseMs: number): Promise<Set<string>> {
  if (jobs.length === 0) return new Set();
  const result = await sql<{ id: string }>`
    update jobs set locked_until = now() + ${Math.round(leaseMs)}::int * interval '1 millisecond'
      from unnest(${jobs.map((job) => job.workspace_id)}::uuid[], ${jobs.map((job) => job.id)}::uuid[]) as mine (workspace_id, id)
     where jobs.workspace_id = mine.workspace_id and jobs.id = mine.id and jobs.locked_by = ${workerId}
    returning jobs.id`.execute(db);
  return new Set(result.rows.map((row) => row.id));
}

const held = (job: Job) => sql`workspace_id = ${job.workspace_id} and id = ${job.id} and locked_by = ${job.locked_by}`;

/** Deletes a finished job, if this claim still holds it; use the transaction that records its effect. */
export async function finishJob(db: Db, job: Job): Promise<boolean> {
  const result = await sql`delete from jobs where ${held(job)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** The deletion of a finished job, if this claim still holds it: a WITH query of the statement that records its effect. */
export function finishJobQuery(job: Job): RawBuilder<unknown> {
  return sql`delete from jobs where ${held(job)}`;
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
