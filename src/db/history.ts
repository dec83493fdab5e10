// The history of a thread's status, stage, agent and labels: one row per changed field, written in
// the same statement or transaction as the change itself.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import type { Db } from './database.js';
import type { HistoryField, NewThreadHistory, ThreadStatus } from './schema.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type ThreadHistoryEntry = components['schemas']['ThreadHistoryEntry'];

/**
 * One field's change: statuses or ids, and for a move out of a stage how long the thread stayed in
 * it; or the whole label lists before and after.
 */
export type FieldChange =
  | { field: Exclude<HistoryField, 'labels'>; from: string | null; to: string | null; stayMs?: number }
  | { field: 'labels'; from: readonly string[] | null; to: readonly string[] };

/** The rows recording `changes` of a thread, ids in order so entries of one change list in it. */
export function historyRows(
  workspaceId: string,
  threadId: string,
  changes: readonly FieldChange[],
  who: { actor: Actor; reason: string | null },
  now: Date,
): NewThreadHistory[] {
  return changes.map((change) => {
    const base = {
      workspace_id: workspaceId,
      id: uuidv7(),
      thread_id: threadId,
      field: change.field,
      from_status: null,
      to_status: null,
      from_id: null,
      to_id: null,
    };
    const values =
      change.field === 'labels'
        ? { ...base, from_labels: change.from && JSON.stringify(change.from), to_labels: JSON.stringify(change.to), stay_ms: null }
        : change.field === 'status'
          ? { ...base, from_status: change.from as ThreadStatus | null, to_status: change.to as ThreadStatus | null, stay_ms: change.stayMs ?? null }
          : { ...base, from_id: change.from, to_id: change.to, stay_ms: change.stayMs ?? null };
    return {
      ...values,
      actor_type: who.actor.type,
      actor_id: who.actor.id,
      reason: who.reason,
      created_at: now,
    };
  });
}

/**
 * A UUIDv7 made by PostgreSQL, for history rows written set-wise (one per thread of a deleted
 * agent): the time, the version, random bits. A constant of the code.
 */
export const HISTORY_ID_SQL = `encode(overlay(uuid_send(gen_random_uuid()) placing int8send(((extract(epoch from clock_timestamp()) * 1000)::bigint << 16) | 28672 | (random() * 4095)::int) from 1 for 8), 'hex')::uuid`;

const value = (side: 'from' | 'to'): { sql: string } => ({
  sql: `case p.field when 'status' then to_jsonb(p.${side}_status) when 'labels' then p.${side}_labels else to_jsonb(p.${side}_id) end`,
});

const historyList = listSource<ThreadHistoryEntry>('thread_history', {
  id: 'id',
  field: 'field',
  from: value('from'),
  to: value('to'),
  actor: { sql: `json_build_object('type', p.actor_type, 'id', p.actor_id)` },
  reason: 'reason',
  createdAt: { instant: 'created_at' },
});

/** A page of the thread's history, oldest first. */
export async function listThreadHistory(db: Db, workspaceId: string, threadId: string, page: number, limit: number): Promise<PageText<ThreadHistoryEntry>> {
  const where: Condition[] = [
    ['workspace_id = ?', workspaceId],
    ['thread_id = ?', threadId],
  ];
  return listPage(db, historyList, where, { page, limit });
}
