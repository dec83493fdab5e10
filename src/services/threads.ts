// Opening a thread and changing its status, stage, agent or labels, with their events: thread.created and
// thread.updated are recorded here only, in the change's transaction. What a change does is pure
// (tested without HTTP or a database); applying it holds under concurrent changes. Fields sent with
// their current value change nothing and record nothing.
import { v7 as uuidv7 } from 'uuid';
import type { Actor } from '../actor.js';
import { transact, type Db } from '../db/database.js';
import type { FieldChange } from '../db/history.js';
import {
  findOpenThreadId,
  insertOpenThread,
  readThreadForChange,
  threadRowToThread,
  writeThreadChange,
  type OpenThreadInput,
  type VersionedThread,
} from '../db/threads.js';
import { recordEvent } from '../events/record.js';
import type { ThreadRow, ThreadStatus } from '../db/schema.js';
import { normalizeLabels, sameLabels } from './labels.js';
import * as sla from '../sla/clocks.js';

export interface ThreadState {
  status: ThreadStatus;
  stage_id: string;
  stage_entered_at: Date;
  agent_id: string | null;
  labels: string[];
}

export interface ThreadChange {
  status?: ThreadStatus | undefined;
  stageId?: string | undefined;
  /** null unassigns. */
  agentId?: string | null | undefined;
  /** The whole new list, as sent (kept as services/labels.ts keeps labels). */
  labels?: readonly string[] | undefined;
}

export interface PlannedChange {
  /** The columns to write; empty when nothing changes. */
  set: Partial<{ status: ThreadStatus; closed_at: Date | null; stage_id: string; stage_entered_at: Date; agent_id: string | null; labels: string[] }>;
  /** One entry per changed field, in the order status, stageId, agentId, labels. */
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
  const labels = change.labels && normalizeLabels(change.labels);
  if (labels !== undefined && !sameLabels(labels, current.labels)) {
    set.labels = labels;
    changes.push({ field: 'labels', from: current.labels, to: labels });
  }
  return { set, changes };
}

/**
 * Opens a thread for the pair (db/threads.ts insertOpenThread says how) with its thread.created,
 * the one emitter of that type. Undefined when the pair already has an open thread or the contact
 * is gone. Run it in a transaction. `withNext`: its event's statement travels with the
 * transaction's next one (recordEvent), for a caller that has more to write.
 */
export async function openThread(
  trx: Db,
  workspaceId: string,
  input: OpenThreadInput,
  now: Date,
  actor: Actor,
  { withNext = false } = {},
): Promise<ThreadRow | undefined> {
  // Its `sla` stored with the row when its policy is known before it exists (one version of the row).
  const id = uuidv7();
  const cycle = await sla.openingCycle(trx, workspaceId, id, now);
  const inserted = await insertOpenThread(trx, workspaceId, { ...input, labels: normalizeLabels(input.labels ?? []) }, now, actor, { id, sla: cycle?.sla });
  if (!inserted) return undefined;
  const opened = await sla.onThreadOpened(trx, inserted, cycle);
  await recordEvent(trx, workspaceId, 'thread.created', threadRowToThread(opened), actor, now, { withNext });
  return opened;
}

/**
 * The pair's open thread, opened now when it has none (concurrent callers end in the same one), and
 * whether this call opened it. Run it in a transaction. `knownNone`: the caller read that the pair
 * has none (it is not looked up first); `withNext` as openThread's.
 */
export async function openThreadId(
  trx: Db,
  workspaceId: string,
  contactId: string,
  channelId: string,
  now: Date,
  actor: Actor,
  { knownNone = false, withNext = false } = {},
): Promise<{ id: string; opened: boolean }> {
  const open = knownNone ? undefined : await findOpenThreadId(trx, workspaceId, contactId, channelId);
  if (open) return { id: open, opened: false };
  const opened = await openThread(trx, workspaceId, { contactId, channelId }, now, actor, { withNext });
  if (opened) return { id: opened.id, opened: true };
  const winner = await findOpenThreadId(trx, workspaceId, contactId, channelId);
  if (!winner) throw new Error(`no open thread for contact ${contactId} and channel ${channelId}`);
  return { id: winner, opened: false };
}

/**
 * The one emitter of thread.updated: `row` is the thread after a change `actor` made to `before`
 * (its service levels follow the change first); in the change's transaction. The thread as it is now.
 */
export async function threadUpdated(
  trx: Db,
  workspaceId: string,
  row: ThreadRow,
  actor: Actor,
  now: Date = new Date(),
  before?: ThreadRow,
  { withNext = false } = {},
): Promise<ThreadRow> {
  const after = await sla.onThreadChange(trx, before, row, actor, now);
  await recordEvent(trx, workspaceId, 'thread.updated', threadRowToThread(after), actor, now, { withNext });
  return after;
}

const MAX_ATTEMPTS = 50;

/** How changeThread may save round trips for a caller that holds the thread. */
export interface ChangeOptions {
  /**
   * The thread as the caller's transaction `db` holds it locked and has not changed since (a run's
   * first statement read it so): the first attempt plans from it instead of reading it again.
   */
  read?: VersionedThread | undefined;
  /** Its thread.updated travels with the transaction's next statement (recordEvent's `withNext`). */
  withNext?: boolean | undefined;
}

/**
 * Applies `change` (or the change a function makes of the thread as read: labels added to those it
 * has) to the thread and records it in its history: read, plan, then a write that
 * holds only if the thread is still the version read; a concurrent change makes it read and plan
 * again, so changes of one thread apply one after another, each entry's `from` being the value it
 * replaced, with its thread.updated event in the same transaction. Undefined when there is no such thread.
 */
export async function changeThread(
  db: Db,
  workspaceId: string,
  id: string,
  change: ThreadChange | ((current: ThreadRow) => ThreadChange),
  who: { actor: Actor; reason: string | null },
  options: ChangeOptions = {},
): Promise<ThreadRow | undefined> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const held = attempt === 1 && options.read?.row.id === id ? options.read : undefined;
    const read = held ?? (await readThreadForChange(db, workspaceId, id));
    if (!read) return undefined;
    const now = new Date();
    const { set, changes } = planThreadChange(read.row, typeof change === 'function' ? change(read.row) : change, now);
    if (changes.length === 0) return read.row;
    const written = await transact(db, async (trx) => {
      const row = await writeThreadChange(trx, workspaceId, read, set, changes, who, now);
      return row && threadUpdated(trx, workspaceId, row, who.actor, now, read.row, { withNext: options.withNext });
    });
    if (written) return written;
  }
  throw new Error(`thread ${id} kept changing under ${MAX_ATTEMPTS} attempts to change it`);
}
