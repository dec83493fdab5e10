// SLA timers: one `sla-timer` job per thread with running clocks (keyed `sla:<thread id>`), due at
// the earliest moment still to record of its clocks: a warning time (`sla.warning`) or a due time
// (`sla.breached`) not yet recorded. Every change of a thread's clocks moves that one job to the new
// earliest moment (or adds it, or cancels it when none is left), in the change's own statement
// (timerQueries), and only when the earliest moment changed: no scan of threads ever looks for
// breaches. Falling due, the timer locks the thread, records every moment due by then (oldest
// first; once per thread, metric and clock: each is a flag of its clock) with the thread's new
// `sla`, and re-arms itself at the next moment from the clocks as it holds them, or ends, in the
// same transaction. The lock is what keeps a moment from being lost: a change moving a running
// timer waits for it (or it for the change) and whichever commits second sees the other's work.
// Across instances and restarts, the queue's lease hands a timer whose holder died to another, and
// a holder whose lease ran out fails its commit (ClaimLost). services/sla-events.ts emits the events.
import { sql, type RawBuilder } from 'kysely';
import { transact, type Db } from '../db/database.js';
import type { SlaClockRow, ThreadRow } from '../db/schema.js';
import { slaBreached, slaWarned } from '../services/sla-events.js';
import {
  cancelWaitingQuery,
  finishJob,
  LONGEST_NAP_MS,
  notifyAddedQuery,
  placeKeyedJobQueries,
  rearmJob,
  rescheduleJob,
  wakeFor,
  type Job,
} from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { setThreadSla } from '../db/threads.js';

export const SLA_TIMER = 'sla-timer';

const keyOf = (threadId: string): string => `sla:${threadId}`;

/** A moment of a clock still to record: its warning or its due (`breach`) time. */
interface Moment {
  kind: 'warning' | 'breach';
  at: Date;
  clock: SlaClockRow;
}

function momentsOf(clock: SlaClockRow): Moment[] {
  const moments: Moment[] = [];
  if (clock.warn_at && !clock.warned && !clock.breached) moments.push({ kind: 'warning', at: clock.warn_at, clock });
  if (clock.due_at && !clock.breached) moments.push({ kind: 'breach', at: clock.due_at, clock });
  return moments;
}

/** Oldest first; a clock's warning before its breach when they fall together. */
const inOrder = (a: Moment, b: Moment): number => a.at.getTime() - b.at.getTime() || (a.kind === b.kind ? 0 : a.kind === 'warning' ? -1 : 1);

/** When the thread's timer is due: the earliest moment still to record of `clocks`; undefined when none is left. */
export function timerDueAt(clocks: readonly SlaClockRow[]): Date | undefined {
  return clocks.flatMap(momentsOf).sort(inOrder)[0]?.at;
}

/**
 * Statement builder: the thread's timer following a change of its clocks from `before` to `after`,
 * as WITH queries of the change's statement (`with`), and the NOTIFY to select with them (`select`,
 * none when none is needed). Nothing when the earliest moment is the same; else the timer moved to
 * it (added when the thread has none; only added when the thread was `opened` in this transaction),
 * or cancelled when none is left (a running one ends itself, finding none). The workers are woken
 * only when it falls due soon (wakeFor); a later one is found by their claims, which sleep no
 * longer than the next job's due time.
 */
export function timerQueries(
  workspaceId: string,
  threadId: string,
  change: { before: readonly SlaClockRow[]; after: readonly SlaClockRow[]; opened?: boolean },
  now: number = Date.now(),
): { with: RawBuilder<unknown>[]; select: RawBuilder<unknown> | undefined } {
  const orderingKey = keyOf(threadId);
  const due = timerDueAt(change.after);
  if (due?.getTime() === timerDueAt(change.before)?.getTime()) return { with: [], select: undefined };
  if (!due) return { with: [sql`sla_timer_cancelled as (${cancelWaitingQuery(SLA_TIMER, workspaceId, { orderingKey })})`], select: undefined };
  const placed = placeKeyedJobQueries(SLA_TIMER, 'sla_timer', { workspaceId, orderingKey, payload: { threadId }, runAt: due, fresh: change.opened });
  return { with: placed, select: wakeFor(due, now) ? notifyAddedQuery(SLA_TIMER, 'sla_timer') : undefined };
}

/** The job ended with its effect; a claim lost meanwhile rolls the effect back. */
class ClaimLost extends Error {}

/**
 * A thread's timer falling due: records each moment of its clocks due by `now` (by default the time
 * the thread's lock was taken), oldest first, then re-arms the job at the next moment, or ends it
 * when none is left, in one transaction.
 */
export async function fireTimer(db: Db, job: Job<'sla-timer'>, now?: Date): Promise<void> {
  const { workspace_id: workspaceId, payload } = job;
  await transact(db, async (trx) => {
    const { rows } = await sql<ThreadRow>`select * from threads where workspace_id = ${workspaceId} and id = ${payload.threadId} for update`.execute(trx);
    let thread = rows[0];
    const at = now ?? new Date();
    const clocks = thread
      ? await trx.selectFrom('sla_clocks').selectAll().where('workspace_id', '=', workspaceId).where('thread_id', '=', payload.threadId).execute()
      : [];
    const due = clocks
      .flatMap(momentsOf)
      .filter((moment) => moment.at.getTime() <= at.getTime())
      .sort(inOrder);
    for (const moment of due) thread = await record(trx, thread!, moment, at);
    const next = timerDueAt(clocks);
    const held = next ? await rearmJob(trx, job, next, wakeFor(next, at.getTime())) : await finishJob(trx, job);
    if (!held) throw new ClaimLost('the SLA timer was taken by another instance; this run rolled back');
  });
}

/** Marks the moment recorded on its clock (`clock` too: the next moment is computed from it), writes the thread's `sla` and records the event. */
async function record(trx: Db, thread: ThreadRow, { kind, clock }: Moment, now: Date): Promise<ThreadRow> {
  const { workspace_id: workspaceId, id: threadId } = thread;
  const breach = kind === 'breach';
  await trx
    .updateTable('sla_clocks')
    .set(breach ? { breached: true } : { warned: true })
    .where('workspace_id', '=', workspaceId)
    .where('thread_id', '=', threadId)
    .where('metric', '=', clock.metric)
    .execute();
  if (breach) clock.breached = true;
  else clock.warned = true;
  const { metric } = clock;
  const sla = thread.sla && {
    ...thread.sla,
    breached: breach && !thread.sla.breached.includes(metric) ? [...thread.sla.breached, metric] : thread.sla.breached,
  };
  if (sla) sla.status = sla.breached.length > 0 ? 'breached' : 'warning';
  const row = await setThreadSla(trx, workspaceId, threadId, sla);
  await (breach ? slaBreached : slaWarned)(trx, row, metric, now);
  return row;
}

/** How many times in a row a timer that threw (the database away) is tried before its failure is logged and it waits AFTER_FAILURES_MS. */
const ATTEMPTS = 10;

/**
 * How long a timer that failed ATTEMPTS times waits before it starts again: it stands for every
 * moment still to come of its thread, so it is never dropped.
 */
const AFTER_FAILURES_MS = LONGEST_NAP_MS;

export const slaTimerHandler = (options: { db: Db; logger: Logger; retryBaseMs: number }): QueueHandler<'sla-timer'> => ({
  queue: SLA_TIMER,
  maxAttempts: ATTEMPTS,
  retryBaseMs: options.retryBaseMs,
  async run(job) {
    await fireTimer(options.db, job);
    return { kind: 'finished' };
  },
  async giveUp(job, lastError) {
    options.logger.error({ jobId: job.id, payload: job.payload, error: lastError }, 'an SLA timer failed on each attempt; it starts again in a minute');
    await rescheduleJob(options.db, job, AFTER_FAILURES_MS, lastError);
  },
});
