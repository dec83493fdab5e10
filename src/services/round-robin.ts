// Round robin: a thread "to a person" goes to the active, online person with room
// under their capacity whose last round-robin assignment is the oldest; nobody eligible leaves it
// without an agent. Callers: an AI agent's handoff (src/ai/replies.ts) and the automations'
// assign_round_robin action. One history entry and one thread.updated per call, by the caller's actor.
//
// Locking, so that assignments at the same moment (any instances, any connections) never take a
// person over capacity: the thread's row first (FOR UPDATE, as every change of the thread would),
// then a transaction-scoped advisory lock of the workspace (db/agents.ts lockRoundRobin), then the
// choice and the person's last_assigned_at in one statement, then the thread. The advisory lock was
// chosen over locking the eligible agents' rows FOR UPDATE because it writes nothing (row locks
// dirty each row's page and need a fixed order over a set that changes while being read), does not
// block PATCH /agents, and costs one shared-memory entry; over a counter column because an open-
// thread count would have to follow every close, reopen, reassignment and deletion elsewhere,
// while counting threads_open_agent_idx up to the capacity stays exact by construction. It only
// serialises round robins of one workspace, each a few statements long. The fixed order (thread row,
// then the workspace lock, then one agent row) means two round robins never wait on each other in a
// cycle. Run it in a READ COMMITTED transaction (the default): each statement after the lock sees
// what the previous holder committed.
import type { Actor } from '../actor.js';
import { lockRoundRobin, takeRoundRobinAgent } from '../db/agents.js';
import type { Db } from '../db/database.js';
import type { FieldChange } from '../db/history.js';
import type { ThreadRow } from '../db/schema.js';
import { readThreadForChange, writeThreadChange } from '../db/threads.js';
import { planThreadChange, threadUpdated } from './threads.js';

/** The history reason when nobody is eligible and the caller gave none. */
export const NO_AGENT_AVAILABLE = 'no_agent_available';

/**
 * Assigns the thread by round robin in the caller's transaction and returns it as it is now;
 * undefined when the workspace has no such thread. Its history gets one `agentId` entry by `actor`
 * with `reason`: to the person chosen, or to null when nobody is eligible (from null to null when it
 * had no agent), then with `reason` or, when that is null, `no_agent_available`. The thread is not
 * assigned later by itself.
 */
export async function assignRoundRobin(trx: Db, workspaceId: string, threadId: string, actor: Actor, reason: string | null): Promise<ThreadRow | undefined> {
  if (!trx.isTransaction) throw new Error('assignRoundRobin runs in the caller’s transaction');
  const read = await readThreadForChange(trx, workspaceId, threadId, { lock: true });
  if (!read) return undefined;
  await lockRoundRobin(trx, workspaceId);
  const agentId = (await takeRoundRobinAgent(trx, workspaceId, threadId)) ?? null;
  const now = new Date();
  const { set, changes } = planThreadChange(read.row, { agentId }, now);
  // Unchanged (no agent before and none now, or the same person again) still leaves its entry.
  const entries: FieldChange[] = changes.length > 0 ? changes : [{ field: 'agentId', from: read.row.agent_id, to: agentId }];
  const who = { actor, reason: agentId === null ? (reason ?? NO_AGENT_AVAILABLE) : reason };
  const row = await writeThreadChange(trx, workspaceId, read, set, entries, who, now);
  // The row is locked by this transaction since it was read: it cannot have changed meanwhile.
  if (!row) throw new Error(`thread ${threadId} changed while locked`);
  return threadUpdated(trx, workspaceId, row, actor, now, read.row);
}
