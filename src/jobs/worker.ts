// Runs one queue's jobs in this process: claims what is due (up to `concurrency` at a time), runs
// each, then finishes, retries (with backoff) or gives it up. While jobs run it renews their leases
// every third of a lease, so a process that dies leaves them to another instance within one lease,
// however long a job takes. It sleeps until a notification, a retry falling due or the poll
// interval; stopping stops claiming, lets running jobs finish until the deadline, and then aborts
// them and releases their claims for another instance. Round trips are what a job costs the
// service most (BENCHMARKS.md, issue 34), so they are shared: a claim takes every due job it has
// room for (with what each needs, a handler's prefetch), a handler may space its claims while
// notifications keep coming, and `done` jobs are deleted together.
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import { backoffMs, retryDelayMs } from './backoff.js';
import type { JobListener } from './listen.js';
import { countJobOutcome } from '../metrics/registry.js';
import { batcher } from './batch.js';
import {
  claimJobs,
  finishJobs,
  LONGEST_NAP_MS,
  postponeJob,
  releaseJob,
  renewLeases,
  retryJob,
  type CarriedWrites,
  type ClaimGroups,
  type HeldJob,
  type Job,
  type Prefetch,
} from './queue.js';

/** What a job's run asks of the worker. */
export type JobResult =
  /** Done: the worker deletes the job. */
  | { kind: 'done' }
  /** Done, and the job already deleted itself (finishJob) in the transaction of its effect. */
  | { kind: 'finished' }
  /**
   * A passing failure: try again after the backoff, or give up after the last attempt. `expected`
   * when waiting is the job's normal course (a held status whose message has no provider id yet):
   * its retries and its last attempt are logged at debug only, and giveUp says what was given up.
   */
  | { kind: 'retry'; error: string; expected?: boolean }
  /** Not tried (e.g. its target is busy): run it again at `runAt`, the attempt not counted. */
  | { kind: 'later'; runAt: Date };

/** What runs the jobs of queue `Q` (a kind of kinds.ts: its jobs' payloads are typed). */
export interface QueueHandler<Q extends string = string> {
  queue: Q;
  maxAttempts: number;
  retryBaseMs: number;
  run(job: Job<Q>, signal: AbortSignal): Promise<JobResult>;
  /** The last attempt failed too: record the failure, and finishJob in the same transaction. */
  giveUp(job: Job<Q>, lastError: string): Promise<void>;
  /**
   * Runs once before the worker's first claim, and again before the next claim while it fails
   * (e.g. adding the recurring schedules' jobs).
   */
  prepare?(): Promise<void>;
  /**
   * What it can take now, per group of jobs (e.g. per webhook endpoint): the claim leaves the
   * jobs over it in the queue instead of handing them over to be put back.
   */
  claimGroups?(): ClaimGroups;
  /** What to read with each claimed job, in the claim's statement (its `prefetched`). */
  prefetch?: Prefetch;
  /**
   * The least time between two claims while jobs keep coming (default 0): the notifications of jobs
   * added meanwhile are answered by one claim instead of one each. The first job after a quiet
   * spell is claimed at once.
   */
  claimIntervalMs?: number;
  /**
   * Writes it has waiting (outcomes gathered to be recorded together), taken to travel in the next
   * claim's statement (CarriedWrites): `settled` is then called with the claim's error, or none once
   * they committed. Undefined when nothing waits.
   */
  carry?(): (CarriedWrites & { settled: (err?: unknown) => void }) | undefined;
}

export interface WorkerOptions {
  db: Db;
  logger: Logger;
  listener?: JobListener | undefined;
  concurrency: number;
  /** How long a claim holds a job; the worker renews it every third of that while the job runs. */
  leaseMs: number;
  pollMs: number;
}

export interface Worker {
  readonly id: string;
  /** Jobs running now. */
  running(): number;
  stop(deadline: AbortSignal): Promise<void>;
}

/** How long a freed slot may wait for others before the worker claims for it alone. */
const COALESCE_MS = 5;

/** How long `done` jobs wait to be deleted together (one statement for those finishing meanwhile). */
const FINISH_GATHER_MS = 2;

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How long a stop waits, past its deadline, for the jobs it aborted. A job that ignores its abort
 * (stuck on something the signal does not reach) would otherwise hold the process's stop forever:
 * it is left to its lease instead, no longer renewed, and another instance takes it when it runs out.
 */
export const ABORTED_JOBS_WAIT_MS = 2_000;

/**
 * The worker's wake-up: poke() ends the current nap at once, or the next one if none runs (a poke
 * during a claim is not lost). Plain callbacks: an AbortController's abort() builds a DOMException,
 * with its stack, on every notification and finished job.
 */
function wakeUp(): { poke(): void; poked(): boolean; nap(ms: number): Promise<void>; clear(): void } {
  let poked = false;
  let ends: (() => void) | undefined;
  return {
    poke() {
      poked = true;
      const end = ends;
      ends = undefined;
      end?.();
    },
    poked: () => poked,
    nap(ms) {
      if (poked || ms <= 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          if (ends === done) ends = undefined;
          resolve();
        }
        ends = done;
      });
    },
    clear() {
      poked = false;
    },
  };
}

/** A job this worker runs. */
interface Running<Q extends string> {
  job: Job<Q>;
  abort: AbortController;
  done: Promise<void>;
  /** Its outcome is being recorded: a renewal that misses it saw that, not a lost lease. */
  settling: boolean;
  /** Another instance took it (its lease ran out): it is aborted and its outcome is not recorded. */
  lost: boolean;
}

export function startWorker<Q extends string>(handler: QueueHandler<Q>, options: WorkerOptions): Worker {
  const { db, logger } = options;
  const id = `${handler.queue}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = logger.child({ worker: id });
  const inFlight = new Map<string, Running<Q>>();
  let stopping = false;
  const wake = wakeUp();
  const poke = (): void => wake.poke();
  // Jobs that ended `done` are deleted together, a few ms after the first of them.
  const finishing = batcher<HeldJob>(
    async (jobs) => {
      await finishJobs(db, jobs);
    },
    { delayMs: FINISH_GATHER_MS, max: 256 },
  );
  options.listener?.subscribe((queue) => {
    if (queue === handler.queue || queue === '*') poke();
  });

  async function settle(job: Job<Q>, result: JobResult): Promise<void> {
    countJobOutcome(
      handler.queue,
      result.kind === 'later' ? 'postponed' : result.kind !== 'retry' ? 'done' : job.attempts >= handler.maxAttempts ? 'failed' : 'retried',
    );
    if (result.kind === 'finished') return;
    if (result.kind === 'later') {
      await postponeJob(db, job, result.runAt);
      return;
    }
    if (result.kind === 'done') {
      await finishing.add(job);
      return;
    }
    if (job.attempts >= handler.maxAttempts) {
      log[result.expected ? 'debug' : 'warn']({ jobId: job.id, attempts: job.attempts, error: result.error }, 'job failed on its last attempt; giving up');
      await handler.giveUp(job, result.error);
      return;
    }
    const delay = retryDelayMs(job.attempts, handler.retryBaseMs);
    log[result.expected ? 'debug' : 'info']({ jobId: job.id, attempts: job.attempts, retryInMs: delay, error: result.error }, 'job failed; will retry');
    await retryJob(db, job, new Date(Date.now() + delay), result.error);
  }

  // Whether the last claim took all it could of what was due. If it did, a job that finishes frees
  // nothing new to claim, unless it had an ordering key (the key's next job falls due) or was put
  // back for later (the wake-up time changes): the worker then sleeps on instead of claiming again.
  let tookAllDue = false;

  async function runOne(entry: Running<Q>): Promise<void> {
    const { job, abort } = entry;
    let rescheduled = true;
    try {
      let result: JobResult;
      try {
        result = await handler.run(job, abort.signal);
      } catch (err) {
        if (entry.lost) return leftToTheNewHolder(job);
        if (abort.signal.aborted) {
          await releaseJob(db, job);
          return;
        }
        result = { kind: 'retry', error: JSON.stringify({ code: 'internal_error', message: (err as Error).message ?? String(err) }) };
        log.error({ err, jobId: job.id }, 'job threw');
      }
      if (entry.lost) {
        if (result.kind !== 'finished') leftToTheNewHolder(job);
        return;
      }
      if (abort.signal.aborted && result.kind === 'retry') {
        await releaseJob(db, job);
        return;
      }
      entry.settling = true;
      await settle(job, result);
      rescheduled = result.kind === 'retry' || result.kind === 'later';
    } catch (err) {
      // The database is away: the claim runs out and the job is taken again.
      log.warn({ err: (err as Error).message, jobId: job.id }, 'could not record a job outcome; its lease will run out');
    } finally {
      inFlight.delete(job.id);
      if (inFlight.size === 0) stopRenewing();
      if (rescheduled || job.ordering_key !== null || !tookAllDue) poke();
    }
  }

  function leftToTheNewHolder(job: Job<Q>): void {
    log.warn({ jobId: job.id }, 'another instance took a running job (its lease ran out); its outcome is left to that one');
  }

  // Lease renewal: one statement for all running jobs every third of a lease, and only while jobs
  // run (an idle worker costs what it did). A running job whose lease was taken meanwhile (the
  // database was out of reach for longer than the lease) is aborted: another instance runs it now.
  let renewal: NodeJS.Timeout | undefined;
  let renewing = false;
  let renewFailures = 0;

  function startRenewing(): void {
    if (renewal || inFlight.size === 0) return;
    renewal = setInterval(() => void renew(), Math.max(1, Math.floor(options.leaseMs / 3)));
    renewal.unref();
  }

  function stopRenewing(): void {
    clearInterval(renewal);
    renewal = undefined;
  }

  async function renew(): Promise<void> {
    const entries = [...inFlight.values()].filter((entry) => !entry.settling && !entry.lost);
    if (renewing || entries.length === 0) return;
    renewing = true;
    try {
      const kept = await renewLeases(
        db,
        id,
        entries.map((entry) => entry.job),
        options.leaseMs,
      );
      renewFailures = 0;
      for (const entry of entries) {
        if (kept.has(entry.job.id) || entry.settling || inFlight.get(entry.job.id) !== entry) continue;
        entry.lost = true;
        entry.abort.abort();
      }
    } catch (err) {
      if (renewFailures++ === 0) log.warn({ err: (err as Error).message }, 'cannot renew the leases of running jobs; retrying');
    } finally {
      renewing = false;
    }
  }

  // Claims are batched under load: while busy, a freed slot waits up to COALESCE_MS for a quarter
  // of the slots to free up, rather than one claim per finished job (a claim costs about as much
  // for eight jobs as for one). Idle or not, no job waits longer than that for a free slot.
  const batch = Math.max(1, Math.floor(options.concurrency / 4));
  let freeSince: number | undefined;
  const claimIntervalMs = handler.claimIntervalMs ?? 0;
  let lastClaimAt = -Infinity;

  async function loop(): Promise<void> {
    let failures = 0;
    let prepared = false;
    while (!stopping) {
      const free = options.concurrency - inFlight.size;
      if (free > 0 && free < batch && inFlight.size > 0) {
        freeSince ??= Date.now();
        const left = freeSince + COALESCE_MS - Date.now();
        if (left > 0) {
          await wake.nap(left);
          wake.clear();
          continue;
        }
      }
      freeSince = undefined;
      const room = free;
      let claimed: Job<Q>[] = [];
      let nextRunAt: Date | undefined;
      if (room > 0) {
        try {
          if (!prepared) {
            await handler.prepare?.();
            prepared = true;
          }
          if (claimIntervalMs > 0) {
            const left = lastClaimAt + claimIntervalMs - performance.now();
            if (left > 0) await delay(left);
            lastClaimAt = performance.now();
          }
          const carried = handler.carry?.();
          let claim;
          try {
            claim = await claimJobs(db, {
              queue: handler.queue,
              workerId: id,
              limit: room,
              leaseMs: options.leaseMs,
              groups: handler.claimGroups?.(),
              prefetch: handler.prefetch,
              carry: carried,
            });
          } catch (err) {
            carried?.settled(err);
            throw err;
          }
          carried?.settled();
          claimed = claim.jobs;
          nextRunAt = claim.nextRunAt;
          tookAllDue = claimed.length < room && !claim.leftBehind;
          failures = 0;
        } catch (err) {
          failures++;
          if (failures === 1) log.warn({ err: (err as Error).message }, 'cannot claim jobs; retrying');
        }
      }
      if (stopping) {
        for (const job of claimed) await releaseJob(db, job).catch(() => {});
        break;
      }
      for (const job of claimed) {
        const entry: Running<Q> = { job, abort: new AbortController(), done: Promise.resolve(), settling: false, lost: false };
        inFlight.set(job.id, entry);
        entry.done = runOne(entry);
      }
      startRenewing();
      if (claimed.length > 0 && claimed.length === room) continue;
      // Fewer than asked: nothing else is due now. Sleep until a notification, a finished job (its
      // key's next may be due), the next retry or the poll; a wake-up during the claim is not lost
      // (the nap ends at once).
      let waitMs = failures > 0 ? backoffMs(failures + 1, { baseMs: options.pollMs, maxMs: 30_000, jitter: 0 }) : options.pollMs;
      if (nextRunAt) waitMs = Math.min(waitMs, Math.max(0, nextRunAt.getTime() - Date.now()));
      // Never longer than LONGEST_NAP_MS: jobs added without a NOTIFY (due later than that) count on it.
      await wake.nap(Math.min(waitMs, LONGEST_NAP_MS));
      wake.clear();
    }
  }

  const looping = loop().catch((err: unknown) => log.error({ err }, 'worker loop stopped'));

  return {
    id,
    running: () => inFlight.size,
    async stop(deadline) {
      stopping = true;
      poke();
      await looping;
      const all = Promise.all([...inFlight.values()].map((entry) => entry.done));
      const timedOut = new Promise<void>((resolve) => {
        if (deadline.aborted) resolve();
        else deadline.addEventListener('abort', () => resolve(), { once: true });
      });
      await Promise.race([all, timedOut]);
      if (inFlight.size > 0) {
        for (const entry of inFlight.values()) entry.abort.abort();
        const ended = await Promise.race([all.then(() => true), delay(ABORTED_JOBS_WAIT_MS).then(() => false)]);
        if (!ended) {
          // Their outcomes, should they ever come, are not recorded: the lease decides who runs them.
          for (const entry of inFlight.values()) entry.lost = true;
          stopRenewing();
          log.warn({ jobIds: [...inFlight.keys()] }, 'jobs ignored their abort; left to their leases');
        }
      }
    },
  };
}
