// Threads of a workspace: at most one open per (contact, channel), and their NPS answers.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ThreadRow } from './schema.js';
import { listPage, type Page } from './pagination.js';

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

export async function listThreads(db: Db, workspaceId: string, filter: ThreadFilter, page: number, limit: number): Promise<Page<Thread>> {
  let base = db.selectFrom('threads').where('workspace_id', '=', workspaceId);
  if (filter.status) base = base.where('status', '=', filter.status);
  if (filter.contactId) base = base.where('contact_id', '=', filter.contactId);
  if (filter.channelId) base = base.where('channel_id', '=', filter.channelId);
  if (filter.agentId) base = base.where('agent_id', '=', filter.agentId);
  return listPage(base, { page, limit, newestFirst: true }, threadRowToThread);
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
      oc.columns(['workspace_id', 'contact_id', 'channel_id']).where('status', '=', 'open').doNothing(),
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

/** Records the thread's NPS answer; undefined when the thread is unknown or already answered. */
export async function setNpsAnswer(db: Db, workspaceId: string, id: string, score: number, answeredAt: Date): Promise<Thread | undefined> {
  const row = await db
    .updateTable('threads')
    .set({ nps_score: score, nps_created_at: answeredAt, updated_at: new Date() })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('nps_score', 'is', null)
    .returningAll()
    .executeTakeFirst();
  return row && threadRowToThread(row);
}

export interface NpsCounts {
  promotores: number;
  neutros: number;
  detratores: number;
}

/** Counts the answers with from <= nps_created_at <= to: one index-only scan of threads_nps_idx. */
export async function countNpsAnswers(db: Db, workspaceId: string, from: string, to: string): Promise<NpsCounts> {
  const result = await sql<NpsCounts>`
    select count(*) filter (where nps_score >= 9)::int as promotores,
           count(*) filter (where nps_score between 7 and 8)::int as neutros,
           count(*) filter (where nps_score <= 6)::int as detratores
      from threads
     where workspace_id = ${workspaceId}
       and nps_created_at >= ${from}::timestamptz
       and nps_created_at <= ${to}::timestamptz`.execute(db);
  return result.rows[0]!;
}
