// SLA timers: `sla-timer` jobs on the durable queue, one per due time (`breach`) and warning time
// (`warning`) of a thread's running clocks, keyed `sla:<thread id>` (due time as their place in the
// key's order). Every change of a thread's clocks replaces the waiting timers of the clocks it
// changed, in the change's own statement (timerQueries), so no scan of threads ever looks for
// breaches. A timer falling due locks the thread and its clock and, when that clock (same metric, same start) still runs and has
// not recorded it, records sla.warning or sla.breached and the thread's new `sla` with the job's
// end, in one transaction: once per thread, metric and clock, across instances and restarts (a
// duplicate or a rival holder finds it recorded, or fails its commit); services/sla-events.ts emits them.
import { sql, type RawBuilder } from 'kysely';
import { transact, type Db } from '../db/database.js';
import type { SlaClockRow, SlaMetric, ThreadRow } from '../db/schema.js';
import { slaBreached, slaWarned } from '../services/sla-events.js';
import { cancelWaitingQuery, enqueueEachQuery, finishJob, notifyAddedQuery, wakeFor, type Job } from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { setThreadSla } from '../db/threads.js';

export const SLA_TIMER = 'sla-timer';

const keyOf = (threadId: string): string => `sla:${threadId}`;

/** A timer of a clock: its due (`breach`) or warning time, not yet recorded. */
function timersOf(clock: SlaClockRow): Array<{ kind: 'warning' | 'breach'; at: Date }> {
  const timers: Array<{ kind: 'warning' | 'breach'; at: Date }> = [];
  if (clock.due_at && !clock.breached) timers.push({ kind: 'breach', at: clock.due_at });
  if (clock.warn_at && !clock.warned && !clock.breached) timers.push({ kind: 'warning', at: clock.warn_at });
  return timers;
}

/**
 * Statement builder: the thread's timers following a change of its clocks, as WITH queries of the
 * change's statement (`with`), and the NOTIFY to select with them (`select`, none when none is
 * needed). The waiting timers of the clocks in `stopped` (stopped, or replaced by a clock with other
 * times or flags) that had a due or warning time are deleted, and one timer is added per due and
 * warning time not yet recorded of the clocks in `started` (new, or the replacements): the timers
 * of a clock that did not change stay as they are. The workers are woken only when an added timer falls due soon (wakeFor); a
 * later one is found by their claims, which sleep no longer than the next job's due time.
 */
export function timerQueries(
  workspaceId: string,
  threadId: string,
  change: { stopped: readonly SlaClockRow[]; started: readonly SlaClockRow[] },
  now: number = Date.now(),
): { with: RawBuilder<unknown>[]; select: RawBuilder<unknown> | undefined } {
  const queries: RawBuilder<unknown>[] = [];
  const orderingKey = keyOf(threadId);
  for (const [i, clock] of change.stopped.filter((c) => c.due_at !== null || c.warn_at !== null).entries()) {
    queries.push(
      sql`${sql.ref(`sla_timers_cancelled_${i}`)} as (${cancelWaitingQuery(SLA_TIMER, workspaceId, { orderingKey, payload: { metric: clock.metric } })})`,
    );
  }
  const timers = change.started.flatMap((clock) =>
    timersOf(clock).map((timer) => ({ ...timer, metric: clock.metric, startedAt: clock.started_at.toISOString() })),
  );
  if (timers.length === 0) return { with: queries, select: undefined };
  const rows = timers.map((t) => sql`(${t.metric}::text, ${t.startedAt}::text, ${t.kind}::text, ${t.at.toISOString()}::timestamptz)`);
  queries.push(
    sql`sla_timers as (${enqueueEachQuery(SLA_TIMER, {
      workspaceId,
      from: sql`(values ${sql.join(rows)}) as timer (metric, started_at, kind, at)`,
      payload: { threadId: sql`${threadId}::text`, metric: sql`timer.metric`, startedAt: sql`timer.started_at`, kind: sql`timer.kind` },
      runAt: sql`timer.at`,
      createdAt: sql`timer.at`,
      orderingKey: sql`${orderingKey}::text`,
    })})`,
  );
  const soon = timers.some((timer) => wakeFor(timer.at, now));
  return { with: queries, select: soon ? notifyAddedQuery(SLA_TIMER, 'sla_timers') : undefined };
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
