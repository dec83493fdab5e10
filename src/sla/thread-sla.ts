// The service level a thread shows (`thread.sla`), written where its clocks move (clocks.ts) and where
// a timer records a warning or a breach (timers.ts).
import type { Db } from '../db/database.js';
import type { ThreadRow, ThreadSla } from '../db/schema.js';

/** Writes the thread's `sla` as the API shows it, and answers the thread as it is now. */
export async function setThreadSla(trx: Db, workspaceId: string, threadId: string, sla: ThreadSla | null): Promise<ThreadRow> {
  return trx
    .updateTable('threads')
    .set({ sla: sla && JSON.stringify(sla) })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', threadId)
    .returningAll()
    .executeTakeFirstOrThrow();
}
