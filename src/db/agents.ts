// Agents of a workspace.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { Actor } from '../actor.js';
import type { AgentAvailability, AgentRow, AgentType, ThreadRow } from './schema.js';
import { HISTORY_ID_SQL } from './history.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';
import { NAME_MAX, normalizedName } from '../text.js';

export type Agent = components['schemas']['Agent'];
type AgentCreate = components['schemas']['AgentCreate'];
type AgentUpdate = components['schemas']['AgentUpdate'];

export function agentRowToAgent(row: AgentRow): Agent {
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    status: row.status,
    availability: row.availability,
    capacity: row.capacity,
    instructions: row.instructions,
    model: row.model,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const agentList = listSource<Agent>('agents', {
  id: 'id',
  type: 'type',
  name: 'name',
  status: 'status',
  availability: 'availability',
  capacity: 'capacity',
  instructions: 'instructions',
  model: 'model',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

export async function listAgents(
  db: Db,
  workspaceId: string,
  filter: { status?: Agent['status'] | undefined; type?: Agent['type'] | undefined; availability?: AgentAvailability | undefined },
  page: number,
  limit: number,
): Promise<PageText<Agent>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (filter.status) where.push(['status = ?', filter.status]);
  if (filter.type) where.push(['type = ?', filter.type]);
  if (filter.availability) where.push(['availability = ?', filter.availability]);
  return listPage(db, agentList, where, { page, limit });
}

/** The agent's type (fixed at creation), or undefined when the workspace has no such agent. */
export async function getAgentType(db: Db, workspaceId: string, id: string): Promise<AgentType | undefined> {
  const row = await db.selectFrom('agents').select('type').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row?.type;
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
      name: normalizedName(input.name, NAME_MAX),
      status: 'active',
      ...(input.type === 'human'
        ? { type: 'human', instructions: null, model: null, availability: input.availability ?? 'offline', capacity: input.capacity ?? null }
        : { type: 'ai', instructions: input.instructions, model: input.model }),
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
      ...(patch.name !== undefined && { name: normalizedName(patch.name, NAME_MAX) }),
      ...(patch.instructions !== undefined && { instructions: patch.instructions }),
      ...(patch.model !== undefined && { model: patch.model }),
      ...(patch.status !== undefined && { status: patch.status }),
      ...(patch.availability !== undefined && { availability: patch.availability }),
      ...(patch.capacity !== undefined && { capacity: patch.capacity }),
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

/**
 * Serialises the round robin of one workspace until the caller's transaction ends: a transaction-
 * scoped advisory lock, one entry in PostgreSQL's shared lock table, nothing written to any row,
 * released by the commit (after which the next holder's statements see what this one wrote).
 * Assignments of other workspaces, and every other write to agents and threads, go on meanwhile.
 * Its key is a 64-bit hash of the workspace id (seed 15, apart from idempotency's seed 7): two
 * workspaces that collide only wait for each other a little. Safe behind a transaction pooler.
 */
export async function lockRoundRobin(db: Db, workspaceId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`round-robin/${workspaceId}`}, 15))`.execute(db);
}

/**
 * Takes the round robin's next person and marks them assigned now, in one
 * statement: the active, online person with fewer open threads than their capacity (null: no
 * limit), the thread being assigned left out of the count, whose last assignment is the oldest
 * (never assigned first; ties by id). Undefined when nobody is eligible. Hold lockRoundRobin first:
 * without it two transactions could both see the last free place.
 *
 * The candidates come from agents_round_robin_idx in order (its predicate is written as literals
 * so that a prepared statement's generic plan still matches it); each one's load is counted from
 * threads_open_agent_idx, and never past its capacity.
 */
export async function takeRoundRobinAgent(db: Db, workspaceId: string, threadId: string): Promise<string | undefined> {
  const result = await sql<{ id: string }>`
    with chosen as (
      select a.id
        from agents a
       where a.workspace_id = ${workspaceId}::uuid
         and a.type = 'human' and a.status = 'active' and a.availability = 'online'
         and (a.capacity is null
              or (select count(*)
                    from (select 1
                            from threads t
                           where t.workspace_id = a.workspace_id and t.agent_id = a.id and t.status = 'open' and t.id <> ${threadId}::uuid
                           limit a.capacity) open_threads) < a.capacity)
       order by a.last_assigned_at asc nulls first, a.id
       limit 1
    )
    update agents a
       set last_assigned_at = clock_timestamp()
      from chosen c
     where a.workspace_id = ${workspaceId}::uuid and a.id = c.id
    returning a.id`.execute(db);
  return result.rows[0]?.id;
}
