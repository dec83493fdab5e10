// Deleting an agent: its threads are unassigned, each with its history entry and its thread.updated
// event by whoever deleted it, in one transaction.
import type { Actor } from '../actor.js';
import { deleteAgent as deleteAgentRecords } from '../db/agents.js';
import type { Db } from '../db/database.js';
import { threadUpdated } from './threads.js';

/** Deletes an agent; false when there was none. Run it in a transaction. */
export async function deleteAgent(trx: Db, workspaceId: string, id: string, actor: Actor): Promise<boolean> {
  const unassigned = await deleteAgentRecords(trx, workspaceId, id, actor);
  if (!unassigned) return false;
  for (const thread of unassigned) await threadUpdated(trx, workspaceId, thread, actor);
  return true;
}
