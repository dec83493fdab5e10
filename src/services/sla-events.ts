// The emitters of sla.warning and sla.breached: a thread's clock near or past its due time, recorded
// by its timer (src/sla/timers.ts) in the timer's transaction, by the system, with the clock's metric.
import { SYSTEM } from '../actor.js';
import type { Db } from '../db/database.js';
import type { SlaMetric, ThreadRow } from '../db/schema.js';
import { threadRowToThread } from '../db/threads.js';
import { recordEvent } from '../events/record.js';

/** The one emitter of sla.warning. */
export async function slaWarned(trx: Db, thread: ThreadRow, metric: SlaMetric, now: Date): Promise<void> {
  await recordEvent(trx, thread.workspace_id, 'sla.warning', threadRowToThread(thread), SYSTEM, now, { metric });
}

/** The one emitter of sla.breached. */
export async function slaBreached(trx: Db, thread: ThreadRow, metric: SlaMetric, now: Date): Promise<void> {
  await recordEvent(trx, thread.workspace_id, 'sla.breached', threadRowToThread(thread), SYSTEM, now, { metric });
}
