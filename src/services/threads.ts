// Changing a thread's status, stage or agent: what a change does (pure, tested without HTTP or a
// database), and applying it under concurrent changes. Fields sent with their current value change
// nothing and record nothing.
import { transact, type Db } from '../db/database.js';
import type { Actor, FieldChange } from '../db/history.js';
import { readThreadForChange, threadRowToThread, writeThreadChange } from '../db/threads.js';
import { recordEvent } from '../events/record.js';
import type { ThreadRow } from '../db/schema.js';

export interface ThreadState {
  status: 'open' | 'closed';
  stage_id: string;
  stage_entered_at: Date;
  agent_id: string | null;
}

export interface ThreadChange {
  status?: 'open' | 'closed' | undefined;
  stageId?: string | undefined;
  /** null unassigns. */
  agentId?: string | null | undefined;
}

export interface PlannedChange {
  /** The columns to write; empty when nothing changes. */
  set: Partial<{ status: 'open' | 'closed'; closed_at: Date | null; stage_id: string; stage_entered_at: Date; agent_id: string | null }>;
  /** One entry per changed field, in the order status, stageId, agentId. */
  changes: FieldChange[];
}

/**
 * The columns and history entries of `change` applied to `current` at `now`. Closing sets
 * closed_at, reopening clears it; a move records how long the thread stayed in the stage it leaves.
 * Ids compare case-insensitively (PostgreSQL keeps them lower case).
 */
export function planThreadChange(current: ThreadState, change: ThreadChange, now: Date): PlannedChange {
  const set: PlannedChange['set'] = {};
  const changes: FieldChange[] = [];
  if (change.status !== undefined && change.status !== current.status) {
    set.status = change.status;
    set.closed_at = change.status === 'closed' ? now : null;
    changes.push({ field: 'status', from: current.status, to: change.status });
  }
  const stageId = change.stageId?.toLowerCase();
  if (stageId !== undefined && stageId !== current.stage_id) {
    set.stage_id = stageId;
    set.stage_entered_at = now;
    const stayMs = Math.max(0, now.getTime() - current.stage_entered_at.getTime());
    changes.push({ field: 'stageId', from: current.stage_id, to: stageId, stayMs });
  }
  const agentId = change.agentId === undefined ? undefined : (change.agentId?.toLowerCase() ?? null);
  if (agentId !== undefined && agentId !== current.agent_id) {
    set.agent_id = agentId;
    changes.push({ field: 'agentId', from: current.agent_id, to: agentId });
  }
  return { set, changes };
}

const MAX_ATTEMPTS = 50;

/**
 * Applies `change` to the thread and records it in its history: read, plan, then a write that
 * holds only if the thread is still the version read; a concurrent change makes it read and plan
 * again, so changes of one thread apply one after another, each entry's `from` being the value it
 * replaced, with its thread.updated event in the same transaction. Undefined when there is no such thread.
 */
export async function changeThread(
  db: Db,
  workspaceId: string,
  id: string,
  change: ThreadChange,
  who: { actor: Actor; reason: string | null },
): Promise<ThreadRow | undefined> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const read = await readThreadForChange(db, workspaceId, id);
    if (!read) return undefined;
    const now = new Date();
    const { set, changes } = planThreadChange(read.row, change, now);
    if (changes.length === 0) return read.row;
    const written = await transact(db, async (trx) => {
      const row = await writeThreadChange(trx, workspaceId, read, set, changes, who, now);
      if (row) await recordEvent(trx, workspaceId, 'thread.updated', threadRowToThread(row), now);
      return row;
    });
    if (written) return written;
  }
  throw new Error(`thread ${id} kept changing under ${MAX_ATTEMPTS} attempts to change it`);
}
