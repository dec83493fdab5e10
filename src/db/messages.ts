// Messages of a workspace's threads.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { MessageRow } from './schema.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type Message = components['schemas']['Message'];

export interface OutboundMessage {
  contactId: string;
  channelId: string;
  content: string;
}

export function messageRowToMessage(row: MessageRow): Message {
  return {
    id: row.id,
    threadId: row.thread_id,
    contactId: row.contact_id,
    channelId: row.channel_id,
    direction: row.direction,
    content: row.content,
    status: row.status,
    createdAt: row.created_at.toISOString(),
  };
}

const messageList = listSource<Message>('messages', {
  id: 'id',
  threadId: 'thread_id',
  contactId: 'contact_id',
  channelId: 'channel_id',
  direction: 'direction',
  content: 'content',
  status: 'status',
  createdAt: { instant: 'created_at' },
});

/**
 * Appends an outbound message to the pair's open thread and moves the thread's lastMessageAt,
 * in one statement; undefined when the pair has no open thread.
 */
export async function appendToOpenThread(db: Db, workspaceId: string, message: OutboundMessage, now: Date): Promise<MessageRow | undefined> {
  const result = await sql<MessageRow>`
    with thread as (
      update threads
         set last_message_at = greatest(last_message_at, ${now}::timestamptz), updated_at = ${now}::timestamptz
       where workspace_id = ${workspaceId}
         and contact_id = ${message.contactId}
         and channel_id = ${message.channelId}
         and status = 'open'
      returning id
    )
    insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, created_at)
    select ${workspaceId}::uuid, ${uuidv7()}::uuid, thread.id, ${message.contactId}::uuid, ${message.channelId}::uuid,
           'outbound', ${message.content}, 'queued', ${now}::timestamptz
      from thread
    returning *`.execute(db);
  return result.rows[0];
}

export async function insertMessage(db: Db, workspaceId: string, threadId: string, message: OutboundMessage, now: Date): Promise<MessageRow> {
  return db
    .insertInto('messages')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      thread_id: threadId,
      contact_id: message.contactId,
      channel_id: message.channelId,
      direction: 'outbound',
      content: message.content,
      status: 'queued',
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listThreadMessages(db: Db, workspaceId: string, threadId: string, page: number, limit: number): Promise<PageText<Message>> {
  const where: Condition[] = [
    ['workspace_id = ?', workspaceId],
    ['thread_id = ?', threadId],
  ];
  return listPage(db, messageList, where, { page, limit });
}
