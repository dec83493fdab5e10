// Threads of a workspace: at most one open per (contact, channel), and their NPS answers.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ThreadRow } from './schema.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';
import { instantToIso, wholeUtcDays } from '../services/nps.js';

export type Thread = components['schemas']['Thread'];

export interface ThreadFilter {
  status?: Thread['status'] | undefined;
  contactId?: string | undefined;
  channelId?: string | undefined;
  agentId?: string | undefined;
}

export function threadRowToThread(row: ThreadRow): Thread {
  return {
    id: row.id,
    contactId: row.contact_id,
    channelId: row.channel_id,
    agentId: row.agent_id,
    status: row.status,
    npsScore: row.nps_score,
    npsCreatedAt: row.nps_created_at?.toISOString() ?? null,
    lastMessageAt: row.last_message_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const threadList = listSource<Thread>('threads', {
  id: 'id',
  contactId: 'contact_id',
  channelId: 'channel_id',
  agentId: 'agent_id',
  status: 'status',
  npsScore: 'nps_score',
  npsCreatedAt: { instant: 'nps_created_at' },
  lastMessageAt: { instant: 'last_message_at' },
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

export async function listThreads(
  db: Db,
  workspaceId: string,
  filter: ThreadFilter,
  page: number,
  limit: number,
): Promise<PageText<Thread>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (filter.status) where.push(['status = ?', filter.status]);
  if (filter.contactId) where.push(['contact_id = ?', filter.contactId]);
  if (filter.channelId) where.push(['channel_id = ?', filter.channelId]);
  if (filter.agentId) where.push(['agent_id = ?', filter.agentId]);
  return listPage(db, threadList, where, { page, limit, newestFirst: true });
}

export async function getThread(db: Db, workspaceId: string, id: string): Promise<Thread | undefined> {
  const row = await db
    .selectFrom('threads')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && threadRowToThread(row);
}

export async function threadExists(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const row = await db
    .selectFrom('threads')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row !== undefined;
}

export interface OpenThreadInput {
  contactId: string;
  channelId: string;
  agentId?: string | undefined;
  /** Set when the thread opens with a message. */
  lastMessageAt?: Date | undefined;
}

/**
 * Opens a thread for the pair; undefined when the pair already has an open one (the partial
 * unique index decides, so concurrent callers cannot both open one). A contact, channel or agent
 * missing from the workspace fails its composite foreign key (mapped to 422).
 */
export async function insertOpenThread(db: Db, workspaceId: string, input: OpenThreadInput, now: Date): Promise<ThreadRow | undefined> {
  return db
    .insertInto('threads')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      contact_id: input.contactId,
      channel_id: input.channelId,
      agent_id: input.agentId ?? null,
      status: 'open',
      last_message_at: input.lastMessageAt ?? null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      // A literal, not a parameter: a prepared statement's generic plan cannot match a parameter
      // to the partial index's `where status = 'open'`.
      oc.columns(['workspace_id', 'contact_id', 'channel_id']).where('status', '=', sql.lit('open')).doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
}

export async function findOpenThreadId(db: Db, workspaceId: string, contactId: string, channelId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('threads')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('contact_id', '=', contactId)
    .where('channel_id', '=', channelId)
    .where('status', '=', 'open')
    .executeTakeFirst();
  return row?.id;
}

/**
 * Records the thread's NPS answer and counts it in its UTC day of nps_daily in the same statement
 * (a data-modifying CTE), so the rollup stays exact under concurrent answers: only an unanswered
 * thread matches, and an answer never changes afterwards. Undefined when the thread is unknown or
 * already answered.
 *
 * This is the only write of nps_score/nps_created_at, and the API deletes no thread: threads go
 * only by the cascades of deleting their contact, channel or workspace, which the API does not
 * offer (a workspace's nps_daily rows cascade with it). A new path that writes answers or deletes
 * answered threads must update nps_daily in the same statement or transaction.
 */
export async function setNpsAnswer(db: Db, workspaceId: string, id: string, score: number, answeredAt: Date): Promise<Thread | undefined> {
  const row = await db
    .with('answered', (qb) =>
      qb
        .updateTable('threads')
        .set({ nps_score: score, nps_created_at: answeredAt, updated_at: new Date() })
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .where('nps_score', 'is', null)
        .returningAll(),
    )
    .with('counted', (qb) =>
      qb
        .insertInto('nps_daily')
        .columns(['workspace_id', 'day', 'promotores', 'neutros', 'detratores'])
        .expression((eb) =>
          eb
            .selectFrom('answered')
            .select([
              'workspace_id',
              sql<string>`(nps_created_at at time zone 'UTC')::date`.as('day'),
              sql<number>`(nps_score >= 9)::int`.as('promotores'),
              sql<number>`(nps_score between 7 and 8)::int`.as('neutros'),
              sql<number>`(nps_score <= 6)::int`.as('detratores'),
            ]),
        )
        .onConflict((oc) =>
          oc.columns(['workspace_id', 'day']).doUpdateSet((eb) => ({
            promotores: eb('nps_daily.promotores', '+', eb.ref('excluded.promotores')),
            neutros: eb('nps_daily.neutros', '+', eb.ref('excluded.neutros')),
            detratores: eb('nps_daily.detratores', '+', eb.ref('excluded.detratores')),
          })),
        ),
    )
    .selectFrom('answered')
    .selectAll()
    .executeTakeFirst();
  return row && threadRowToThread(row);
}

export interface NpsCounts {
  promotores: number;
  neutros: number;
  detratores: number;
}

const tally = sql`count(*) filter (where nps_score >= 9)::int as promotores,
  count(*) filter (where nps_score between 7 and 8)::int as neutros,
  count(*) filter (where nps_score <= 6)::int as detratores`;

/**
 * Counts the answers with from <= nps_created_at <= to (instants in microseconds since the epoch,
 * as parseInstant reads them), in one statement. When whole UTC days lie inside the window it sums
 * them from nps_daily (one row a day) and counts only the two partial edge days from
 * threads_nps_idx; otherwise it counts from threads_nps_idx alone (one index-only scan).
 */
export async function countNpsAnswers(db: Db, workspaceId: string, fromInstant: bigint, toInstant: bigint): Promise<NpsCounts> {
  const [lower, upper] = [instantToIso(fromInstant), instantToIso(toInstant)];
  const days = wholeUtcDays(fromInstant, toInstant);
  if (!days) {
    const result = await sql<NpsCounts>`
      select ${tally}
        from threads
       where workspace_id = ${workspaceId}
         and nps_created_at >= ${lower}::timestamptz
         and nps_created_at <= ${upper}::timestamptz`.execute(db);
    return result.rows[0]!;
  }
  const result = await sql<NpsCounts>`
    select sum(promotores)::int as promotores, sum(neutros)::int as neutros, sum(detratores)::int as detratores
      from (select promotores, neutros, detratores
              from nps_daily
             where workspace_id = ${workspaceId}
               and day >= ${days.first}::date
               and day < ${days.end}::date
            union all
            select ${tally}
              from threads
             where workspace_id = ${workspaceId}
               and nps_created_at >= ${lower}::timestamptz
               and nps_created_at < ${days.firstStart}::timestamptz
            union all
            select ${tally}
              from threads
             where workspace_id = ${workspaceId}
               and nps_created_at >= ${days.endStart}::timestamptz
               and nps_created_at <= ${upper}::timestamptz) parts`.execute(db);
  return result.rows[0]!;
}
