// SLA timers: `sla-timer` jobs on the durable queue, one per due time (`breach`) and warning time
// (`warning`) of a thread's running clocks, keyed `sla:<thread id>` (due time as their place in the
// key's order). Every change of a thread's clocks replaces its waiting timers in the change's
// transaction (replaceTimers), so no scan of threads ever looks for breaches. A timer falling due
// locks the thread and its clock and, when that clock (same metric, same start) still runs and has
// not recorded it, records sla.warning or sla.breached and the thread's new `sla` with the job's
// end, in one transaction: once per thread, metric and clock, across instances and restarts (a
// duplicate or a rival holder finds it recorded, or fails its commit); services/sla-events.ts emits them.
import { sql } from 'kysely';
import { transact, type Db } from '../db/database.js';
import type { SlaClockRow, SlaMetric, ThreadRow } from '../db/schema.js';
import { slaBreached, slaWarned } from '../services/sla-events.js';
import { cancelWaitingQuery, enqueue, finishJob, type Job } from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { setThreadSla } from '../db/threads.js';

export const SLA_TIMER = 'sla-timer';

const keyOf = (threadId: string): string => `sla:${threadId}`;

/**
 * Deletes the thread's waiting timers (unless `cancel` is false: the caller knows it has none) and
 * adds one per due and warning time of `clocks` not yet recorded. In the change's transaction.
 */
export async function replaceTimers(trx: Db, workspaceId: string, threadId: string, clocks: readonly SlaClockRow[], { cancel = true } = {}): Promise<void> {
  if (cancel)
    await sql`with cancelled as (${cancelWaitingQuery(SLA_TIMER, workspaceId, { orderingKey: keyOf(threadId) })}) select count(*) from cancelled`.execute(trx);
  for (const clock of clocks) {
    const startedAt = clock.started_at.toISOString();
    const timers: Array<{ kind: 'warning' | 'breach'; at: Date }> = [];
    if (clock.due_at && !clock.breached) timers.push({ kind: 'breach', at: clock.due_at });
    if (clock.warn_at && !clock.warned && !clock.breached) timers.push({ kind: 'warning', at: clock.warn_at });
    for (const timer of timers) {
      await enqueue(
        trx,
        SLA_TIMER,
        { threadId, metric: clock.metric, startedAt, kind: timer.kind },
        { workspaceId, orderingKey: keyOf(threadId), runAt: timer.at, createdAt: timer.at },
      );
    }
  }
}

/** The job ended with its effect; a claim lost meanwhile rolls the effect back. */
class ClaimLost extends Error {}

/**
 * A timer falling due: records its event when its clock still runs, unrecorded; answers when to
 * try again when its time moved later (a policy changed), else undefined (the job ended itself).
 */
export async function fireTimer(db: Db, job: Job<'sla-timer'>, now: Date = new Date()): Promise<Date | undefined> {
  const { workspace_id: workspaceId, payload } = job;
  return transact(db, async (trx) => {
    const { rows } = await sql<ThreadRow>`select * from threads where workspace_id = ${workspaceId} and id = ${payload.threadId} for update`.execute(trx);
    const thread = rows[0];
    const clock = thread
      ? await trx
          .selectFrom('sla_clocks')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('thread_id', '=', payload.threadId)
          .where('metric', '=', payload.metric)
          .executeTakeFirst()
      : undefined;
    const current = thread && clock && clock.started_at.toISOString() === payload.startedAt ? clock : undefined;
    if (current) {
      const breach = payload.kind === 'breach';
      const at = breach ? current.due_at : current.warn_at;
      const recorded = breach ? current.breached : current.warned || current.breached;
      if (at && !recorded) {
        if (at.getTime() > now.getTime()) return at;
        await fire(trx, thread!, current, breach, now);
      }
    }
    if (!(await finishJob(trx, job))) throw new ClaimLost('the SLA timer was taken by another instance; this run rolled back');
    return undefined;
  });
}

/** Marks the clock, writes the thread's `sla` and records the event, in the timer's transaction. */
async function fire(trx: Db, thread: ThreadRow, clock: SlaClockRow, breach: boolean, now: Date): Promise<void> {
  const { workspace_id: workspaceId, id: threadId } = thread;
  await trx
    .updateTable('sla_clocks')
    .set(breach ? { breached: true } : { warned: true })
    .where('workspace_id', '=', workspaceId)
    .where('thread_id', '=', threadId)
    .where('metric', '=', clock.metric)
    .execute();
  const metric: SlaMetric = clock.metric;
  const sla = thread.sla && {
    ...thread.sla,
    breached: breach && !thread.sla.breached.includes(metric) ? [...thread.sla.breached, metric] : thread.sla.breached,
  };
  if (sla) sla.status = sla.breached.length > 0 ? 'breached' : 'warning';
  const row = await setThreadSla(trx, workspaceId, threadId, sla);
  await (breach ? slaBreached : slaWarned)(trx, row, metric, now);
}

/** How many times a timer that threw (the database away) is tried before it is given up and logged. */
const ATTEMPTS = 10;

export const slaTimerHandler = (options: { db: Db; logger: Logger; retryBaseMs: number }): QueueHandler<'sla-timer'> => ({
  queue: SLA_TIMER,
  maxAttempts: ATTEMPTS,
  retryBaseMs: options.retryBaseMs,
  async run(job) {
    const later = await fireTimer(options.db, job);
    return later ? { kind: 'later', runAt: later } : { kind: 'finished' };
  },
  async giveUp(job, lastError) {
    options.logger.error({ jobId: job.id, payload: job.payload, error: lastError }, 'an SLA timer given up');
    await finishJob(options.db, job);
  },
});
