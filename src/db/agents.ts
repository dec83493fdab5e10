// Agents of a workspace.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { Actor } from '../actor.js';
import type { AgentRow, ThreadRow } from './schema.js';
import { HISTORY_ID_SQL } from './history.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type Agent = components['schemas']['Agent'];
type AgentCreate = components['schemas']['AgentCreate'];
type AgentUpdate = components['schemas']['AgentUpdate'];

export function agentRowToAgent(row: AgentRow): Agent {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    instructions: row.instructions,
    model: row.model,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const agentList = listSource<Agent>('agents', {
  id: 'id',
  name: 'name',
  status: 'status',
  instructions: 'instructions',
  model: 'model',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

export async function listAgents(
  db: Db,
  workspaceId: string,
  filter: { status?: Agent['status'] | undefined },
  page: number,
  limit: number,
): Promise<PageText<Agent>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (filter.status) where.push(['status = ?', filter.status]);
  return listPage(db, agentList, where, { page, limit });
}

export async function getAgent(db: Db, workspaceId: string, id: string): Promise<Agent | undefined> {
  const row = await db.selectFrom('agents').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row && agentRowToAgent(row);
}

export async function createAgent(db: Db, workspaceId: string, input: AgentCreate): Promise<Agent> {
  const now = new Date();
  const row = await db
    .insertInto('agents')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      name: input.name,
      status: 'active',
      instructions: input.instructions,
      model: input.model,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return agentRowToAgent(row);
}

export async function updateAgent(db: Db, workspaceId: string, id: string, patch: AgentUpdate): Promise<Agent | undefined> {
  const row = await db
    .updateTable('agents')
    .set({
      ...(patch.name !== undefined && { name: patch.name }),
      ...(patch.instructions !== undefined && { instructions: patch.instructions }),
      ...(patch.model !== undefined && { model: patch.model }),
      ...(patch.status !== undefined && { status: patch.status }),
      updated_at: new Date(),
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && agentRowToAgent(row);
}

/**
 * Deletes an agent; undefined when there was none, else the threads it unassigned as they are now.
 * They keep their history, unassigned (the foreign key's `set null`), each with a history entry
 * saying so (reason `agent_deleted`) by `actor`, in the same statement. Their thread.updated events
 * are the caller's (services/agents.ts): run it in a transaction.
 */
export async function deleteAgent(db: Db, workspaceId: string, id: string, actor: Actor): Promise<ThreadRow[] | undefined> {
  const result = await sql<{ id: string; thread_ids: string[] | null }>`
    with gone as (
      delete from agents where workspace_id = ${workspaceId} and id = ${id} returning id
    ), recorded as (
      insert into thread_history (workspace_id, id, thread_id, field, from_id, to_id, actor_type, actor_id, reason, created_at)
      select t.workspace_id, ${sql.raw(HISTORY_ID_SQL)}, t.id, 'agentId', t.agent_id, null, ${actor.type}, ${actor.id}::uuid, 'agent_deleted', ${new Date()}::timestamptz
        from threads t
        join gone g on t.agent_id = g.id
       where t.workspace_id = ${workspaceId}
      returning thread_id
    )
    select id, (select array_agg(thread_id) from recorded) as thread_ids from gone`.execute(db);
  const gone = result.rows[0];
  if (!gone) return undefined;
  if (!gone.thread_ids || gone.thread_ids.length === 0) return [];
  // Read after the statement: its foreign key's `set null` has unassigned them by now.
  return db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).where('id', 'in', gone.thread_ids).execute();
}
