// Messages of a workspace's threads: outbound ones and their delivery status, inbound ones.
import { CompiledQuery, sql, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { Attachment, ChannelRow, ContactRow, Interactive, MessageRow, MessageStatus, QuickReply } from './schema.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type Message = components['schemas']['Message'];
export type MessageTemplate = components['schemas']['MessageTemplate'];
export type MessageError = components['schemas']['MessageError'];

export interface OutboundMessage {
  contactId: string;
  channelId: string;
  /** The text; for a template, its readable form (templateContent); for a file, its caption or null. */
  content: string | null;
  /** The file it sends (one at most: each attachment is its own message). */
  attachments?: Attachment[] | undefined;
  template?: MessageTemplate | undefined;
  /** The AI agent writing it; absent for a message sent through the API. */
  agentId?: string | undefined;
  /** The automation sending it (send_message, send_template, request_nps). */
  automationId?: string | undefined;
  /** Buttons offered with the text (Instagram's quick replies). */
  quickReplies?: QuickReply[] | undefined;
  /** The message it answers (quotes), checked by the caller. */
  replyTo?: string | undefined;
  /** The buttons or list it offers; `content` is their body. */
  interactive?: Interactive | undefined;
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
    externalId: row.external_id,
    error: row.error,
    template: row.template,
    agentId: row.agent_id,
    attachments: row.attachments,
    replyTo: row.reply_to,
    reactions: row.reactions,
    interactive: row.interactive,
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
  externalId: 'external_id',
  error: 'error',
  template: 'template',
  agentId: 'agent_id',
  attachments: 'attachments',
  replyTo: 'reply_to',
  reactions: 'reactions',
  interactive: 'interactive',
  createdAt: { instant: 'created_at' },
});

const templateJson = (message: OutboundMessage): string | null => (message.template ? JSON.stringify(message.template) : null);
const attachmentsJson = (message: OutboundMessage): string => JSON.stringify(message.attachments ?? []);
const quickRepliesJson = (message: OutboundMessage): string | null => (message.quickReplies ? JSON.stringify(message.quickReplies) : null);
const interactiveJson = (message: { interactive?: Interactive | undefined }): string | null =>
  message.interactive ? JSON.stringify(message.interactive) : null;

/**
 * Appends an outbound message to the pair's open thread and moves the thread's lastMessageAt,
 * in one statement; undefined when the pair has no open thread or the contact was erased.
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
         and exists (select 1 from contacts c where c.workspace_id = ${workspaceId} and c.id = ${message.contactId} and c.erased_at is null)
      returning id
    )
    insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, template, agent_id, automation_id, attachments,
                          quick_replies, reply_to, interactive, created_at)
    select ${workspaceId}::uuid, ${uuidv7()}::uuid, thread.id, ${message.contactId}::uuid, ${message.channelId}::uuid,
           'outbound', ${message.content}, 'queued', ${templateJson(message)}::jsonb, ${message.agentId ?? null}::uuid,
           ${message.automationId ?? null}::uuid, ${attachmentsJson(message)}::jsonb, ${quickRepliesJson(message)}::jsonb,
           ${message.replyTo ?? null}::uuid, ${interactiveJson(message)}::jsonb, ${now}::timestamptz
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
      template: templateJson(message),
      agent_id: message.agentId ?? null,
      automation_id: message.automationId ?? null,
      attachments: attachmentsJson(message),
      quick_replies: quickRepliesJson(message),
      reply_to: message.replyTo ?? null,
      interactive: interactiveJson(message),
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Appends an outbound message to a given thread, open or closed, and moves its lastMessageAt, in
 * one statement; undefined when the thread is not the pair's or the contact was erased.
 */
export async function appendToThread(db: Db, workspaceId: string, threadId: string, message: OutboundMessage, now: Date): Promise<MessageRow | undefined> {
  const result = await sql<MessageRow>`
    with thread as (
      update threads
         set last_message_at = greatest(last_message_at, ${now}::timestamptz), updated_at = greatest(updated_at, ${now}::timestamptz)
       where workspace_id = ${workspaceId}
         and id = ${threadId}
         and contact_id = ${message.contactId}
         and channel_id = ${message.channelId}
         and exists (select 1 from contacts c where c.workspace_id = ${workspaceId} and c.id = ${message.contactId} and c.erased_at is null)
      returning id
    )
    insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, template, agent_id, automation_id, attachments, quick_replies,
                          reply_to, interactive, created_at)
    select ${workspaceId}::uuid, ${uuidv7()}::uuid, thread.id, ${message.contactId}::uuid, ${message.channelId}::uuid,
           'outbound', ${message.content}, 'queued', ${templateJson(message)}::jsonb, ${message.agentId ?? null}::uuid,
           ${message.automationId ?? null}::uuid, ${attachmentsJson(message)}::jsonb, ${quickRepliesJson(message)}::jsonb,
           ${message.replyTo ?? null}::uuid, ${interactiveJson(message)}::jsonb, ${now}::timestamptz
      from thread
    returning *`.execute(db);
  return result.rows[0];
}

export async function listThreadMessages(db: Db, workspaceId: string, threadId: string, page: number, limit: number): Promise<PageText<Message>> {
  const where: Condition[] = [
    ['workspace_id = ?', workspaceId],
    ['thread_id = ?', threadId],
  ];
  return listPage(db, messageList, where, { page, limit });
}

export interface InboundMessage {
  threadId: string;
  contactId: string;
  channelId: string;
  /** Null for a file without a caption. */
  content: string | null;
  externalId: string;
  attachments?: Attachment[] | undefined;
  /** The provider id of the message it quotes (WhatsApp `context.id`, Instagram `reply_to.mid`): `reply_to` when the pair has it. */
  replyToExternalId?: string | undefined;
  /** The button or list row tapped. */
  interactive?: Interactive | undefined;
}

/** Stores an inbound message; undefined when the channel already has one with this provider id. */
export async function insertInboundMessage(db: Db, workspaceId: string, message: InboundMessage, now: Date): Promise<MessageRow | undefined> {
  return (
    db
      .insertInto('messages')
      .values({
        workspace_id: workspaceId,
        id: uuidv7(),
        thread_id: message.threadId,
        contact_id: message.contactId,
        channel_id: message.channelId,
        direction: 'inbound',
        content: message.content,
        status: 'delivered',
        external_id: message.externalId,
        ...(message.attachments && message.attachments.length > 0 && { attachments: JSON.stringify(message.attachments) }),
        ...(message.replyToExternalId !== undefined && {
          reply_to: (eb) =>
            eb
              .selectFrom('messages as q')
              .select('q.id')
              .where('q.workspace_id', '=', workspaceId)
              .where('q.channel_id', '=', message.channelId)
              .where('q.contact_id', '=', message.contactId)
              .where('q.external_id', '=', message.replyToExternalId!)
              .limit(1),
        }),
        interactive: interactiveJson(message),
        created_at: now,
      })
      // A literal predicate: a prepared statement's generic plan cannot match a parameter to the partial index.
      .onConflict((oc) => oc.columns(['workspace_id', 'channel_id', 'external_id']).where('external_id', 'is not', sql.lit(null)).doNothing())
      .returningAll()
      .executeTakeFirst()
  );
}

/** What receiving a customer's WhatsApp message depends on, read in one statement (inboundContext). */
export interface InboundContext {
  /** The channel already has a message with this provider id. */
  duplicate: boolean;
  /** The contact holding the sender's BSUID, and the one holding their phone in any form (its stored form first). */
  byBsuid: string | null;
  byPhone: string | null;
  /** The contact the sender is (byBsuid, else byPhone), held FOR KEY SHARE; null when none or when it was merged or erased meanwhile. */
  contact: Pick<ContactRow, 'id' | 'phone' | 'whatsapp_user_id' | 'whatsapp_username'> | null;
  /** The open thread of that contact on the channel. */
  threadId: string | null;
}

/**
 * The fixed text of inboundContext (prepared once per connection, never built per request).
 * $1 workspace, $2 BSUID, $3, $7 and $8 the phone's forms (at most three: phones.ts; null where
 * fewer), $4 its stored form, $5 channel, $6 provider id.
 * The forms are three parameters, not one array, for the plan: PostgreSQL plans an array parameter
 * for ten elements, and its generic plan then looks dearer than a plan made for each request's
 * values, so after five executions it plans every execution anew (about 0.5 ms of the server's
 * CPU an inbound, measured with pg_stat_statements once the contacts table grew). With three
 * the generic plan is the cheaper and is kept.
 */
const INBOUND_CONTEXT = `
  with found as materialized (
    select (select c.id from contacts c where c.workspace_id = $1 and c.whatsapp_user_id = $2::text) as by_bsuid,
           (select c.id from contacts c where c.workspace_id = $1 and c.phone in ($3::text, $7::text, $8::text)
             order by c.phone = $4::text desc, c.id limit 1) as by_phone
  ), sender as (
    -- The id as a value (an init plan), not a join: the contact is then read by its key whatever
    -- the statistics say (with stale ones the planner joined every contact of the workspace).
    select c.id, c.phone, c.whatsapp_user_id, c.whatsapp_username
      from contacts c
     where c.workspace_id = $1 and c.id = (select coalesce(f.by_bsuid, f.by_phone) from found f) and c.erased_at is null
       for key share of c
  )
  select exists (select 1 from messages m where m.workspace_id = $1 and m.channel_id = $5 and m.external_id = $6::text) as duplicate,
         f.by_bsuid, f.by_phone, s.id, s.phone, s.whatsapp_user_id, s.whatsapp_username,
         (select t.id from threads t
           where t.workspace_id = $1 and t.contact_id = s.id and t.channel_id = $5 and t.status = 'open') as thread_id
    from found f left join sender s on true`;

/**
 * In one statement, what a customer's WhatsApp message on `channelId` depends on: whether it is
 * stored already, the contact its sender's BSUID or phone (`phoneForms`, `storedPhone`: phones.ts)
 * finds, that contact held FOR KEY SHARE as lockContact holds it (a merge or an erasure waits for
 * the message; one that committed first leaves `contact` null while a key still finds it), and the
 * contact's open thread on the channel. Run it after the sender's keys are held (lockContactKeys), in the receive's transaction.
 */
export async function inboundContext(
  trx: Db,
  workspaceId: string,
  channelId: string,
  externalId: string,
  sender: { whatsappUserId?: string | undefined; phoneForms?: readonly string[] | undefined; storedPhone?: string | undefined },
): Promise<InboundContext> {
  const forms = sender.phoneForms ?? [];
  if (forms.length > 3) throw new Error(`a phone has at most three forms, not ${forms.length}`);
  const { rows } = await trx.executeQuery<{
    duplicate: boolean;
    by_bsuid: string | null;
    by_phone: string | null;
    id: string | null;
    phone: string | null;
    whatsapp_user_id: string | null;
    whatsapp_username: string | null;
    thread_id: string | null;
  }>(
    CompiledQuery.raw(INBOUND_CONTEXT, [
      workspaceId,
      sender.whatsappUserId ?? null,
      forms[0] ?? null,
      sender.storedPhone ?? null,
      channelId,
      externalId,
      forms[1] ?? null,
      forms[2] ?? null,
    ]),
  );
  const row = rows[0]!;
  return {
    duplicate: row.duplicate,
    byBsuid: row.by_bsuid,
    byPhone: row.by_phone,
    contact: row.id ? { id: row.id, phone: row.phone, whatsapp_user_id: row.whatsapp_user_id, whatsapp_username: row.whatsapp_username } : null,
    threadId: row.thread_id,
  };
}

/**
 * The fixed text of insertInboundOnThread. $1 workspace, $2 id, $3 thread, $4 contact, $5 channel,
 * $6 content, $7 provider id, $8 attachments, $9 the quoted message's provider id, $10 interactive,
 * $11 now, $12 when the customer sent it.
 */
const INSERT_INBOUND_ON_THREAD = `
  with stored as (
    insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, external_id, attachments, reply_to,
                          interactive, created_at)
    values ($1, $2, $3, $4, $5, 'inbound', $6, 'delivered', $7, $8::jsonb,
            (select q.id from messages q where q.workspace_id = $1 and q.channel_id = $5 and q.contact_id = $4 and q.external_id = $9::text limit 1),
            $10::jsonb, $11)
    -- A literal predicate: a prepared statement's generic plan cannot match a parameter to the partial index.
    on conflict (workspace_id, channel_id, external_id) where external_id is not null do nothing
    returning *
  ), moved as (
    update threads
       set last_message_at = greatest(last_message_at, $11::timestamptz),
           last_inbound_at = greatest(last_inbound_at, $12::timestamptz),
           updated_at = $11::timestamptz
     where workspace_id = $1 and id = $3 and exists (select 1 from stored)
  )
  select * from stored`;

/**
 * Stores an inbound message on its thread and moves the thread's lastMessageAt to `now` and its
 * lastInboundAt to `sentAt` (as recordInbound does), in one statement of fixed text; undefined, and
 * the thread left as it was, when the channel already has a message with this provider id.
 */
export async function insertInboundOnThread(db: Db, workspaceId: string, message: InboundMessage, now: Date, sentAt: Date): Promise<MessageRow | undefined> {
  const { rows } = await db.executeQuery<MessageRow>(
    CompiledQuery.raw(INSERT_INBOUND_ON_THREAD, [
      workspaceId,
      uuidv7(),
      message.threadId,
      message.contactId,
      message.channelId,
      message.content,
      message.externalId,
      JSON.stringify(message.attachments ?? []),
      message.replyToExternalId ?? null,
      interactiveJson(message),
      now,
      sentAt,
    ]),
  );
  return rows[0];
}

export async function externalIdExists(db: Db, workspaceId: string, channelId: string, externalId: string): Promise<boolean> {
  const row = await db
    .selectFrom('messages')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('channel_id', '=', channelId)
    .where('external_id', '=', externalId)
    .executeTakeFirst();
  return row !== undefined;
}

/** An outbound message with what its delivery needs: its channel and its contact. */
export interface DeliveryTarget {
  message: MessageRow;
  channel: ChannelRow;
  contact: Pick<ContactRow, 'phone' | 'instagram_id' | 'whatsapp_user_id'>;
  /** The provider id of the message it answers (quotes), when it answers one. */
  replyToExternalId: string | null;
}

export async function getDeliveryTarget(db: Db, workspaceId: string, messageId: string): Promise<DeliveryTarget | undefined> {
  const row = await db
    .selectFrom('messages as m')
    .innerJoin('channels as ch', (join) => join.onRef('ch.workspace_id', '=', 'm.workspace_id').onRef('ch.id', '=', 'm.channel_id'))
    .innerJoin('contacts as co', (join) => join.onRef('co.workspace_id', '=', 'm.workspace_id').onRef('co.id', '=', 'm.contact_id'))
    .leftJoin('messages as q', (join) => join.onRef('q.workspace_id', '=', 'm.workspace_id').onRef('q.id', '=', 'm.reply_to'))
    .selectAll('m')
    .select([
      'ch.type as ch_type',
      'ch.name as ch_name',
      'ch.provider as ch_provider',
      'ch.external_id as ch_external_id',
      'ch.secrets as ch_secrets',
      'ch.created_at as ch_created_at',
      'ch.updated_at as ch_updated_at',
      'ch.default_agent_id as ch_default_agent_id',
      'co.phone as co_phone',
      'co.instagram_id as co_instagram_id',
      'co.whatsapp_user_id as co_whatsapp_user_id',
      'q.external_id as q_external_id',
    ])
    .where('m.workspace_id', '=', workspaceId)
    .where('m.id', '=', messageId)
    .executeTakeFirst();
  if (!row) return undefined;
  const {
    ch_type,
    ch_name,
    ch_provider,
    ch_external_id,
    ch_secrets,
    ch_created_at,
    ch_updated_at,
    ch_default_agent_id,
    co_phone,
    co_instagram_id,
    co_whatsapp_user_id,
    q_external_id,
    ...message
  } = row;
  return {
    message,
    channel: {
      workspace_id: row.workspace_id,
      id: row.channel_id,
      type: ch_type,
      name: ch_name,
      provider: ch_provider,
      external_id: ch_external_id,
      secrets: ch_secrets,
      created_at: ch_created_at,
      updated_at: ch_updated_at,
      default_agent_id: ch_default_agent_id,
    },
    contact: { phone: co_phone, instagram_id: co_instagram_id, whatsapp_user_id: co_whatsapp_user_id },
    replyToExternalId: q_external_id ?? null,
  };
}

/** Moves a queued outbound message to sent with the provider's id (a query to run; it returns the message). */
export function markSent(db: Db, workspaceId: string, id: string, externalId: string | null) {
  return db
    .updateTable('messages')
    .set({ status: 'sent', external_id: externalId })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .returningAll();
}

/** Fails a message that has not gone further than sent (a query to run; it returns the message). */
export function markFailed(db: Db, workspaceId: string, id: string, error: MessageError) {
  return db
    .updateTable('messages')
    .set({ status: 'failed', error: JSON.stringify(error) })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', 'in', ['queued', 'sent'])
    .returningAll();
}

/** Moves a message (by id) from one of `from` to `to` (a query to run; it returns the message when it moved). */
export function advanceStatus(db: Db, workspaceId: string, id: string, from: MessageStatus[], to: MessageStatus) {
  return db.updateTable('messages').set({ status: to }).where('workspace_id', '=', workspaceId).where('id', '=', id).where('status', 'in', from).returningAll();
}

/**
 * The event object of the messages rows a statement's WITH query `cte` returns, as the API shows a
 * message (`data`, built as the message list builds it), with its `contact_id`: for recordChangeEvent.
 */
export function messageEventSource(cte: string): RawBuilder<unknown> {
  return sql`select row_to_json(x)::jsonb as data, p.contact_id from ${sql.table(cte)} as p, lateral (select ${sql.raw(messageList.fields)}) as x`;
}

/**
 * Statement builder: applies a provider status to the channel's outbound message with this provider
 * id, only from one of `from` (so statuses move forward only), recording `error` when given, and
 * returns the message as it now is; no row when none matched (unknown id, or a status that would
 * move it back). Undefined when there is no status to move from.
 */
export function providerStatusChange(
  db: Db,
  workspaceId: string,
  channelId: string,
  externalId: string,
  from: MessageStatus[],
  to: MessageStatus,
  error: MessageError | undefined,
) {
  if (from.length === 0) return undefined;
  return db
    .updateTable('messages')
    .set({ status: to, ...(error && { error: JSON.stringify(error) }) })
    .where('workspace_id', '=', workspaceId)
    .where('channel_id', '=', channelId)
    .where('external_id', '=', externalId)
    .where('direction', '=', 'outbound')
    .where('status', 'in', from)
    .returningAll();
}

/** What sending a message to a contact on a channel depends on; each part absent when unknown. */
export interface SendContext {
  contact: Pick<ContactRow, 'phone' | 'instagram_id' | 'whatsapp_user_id'> | undefined;
  channel: Pick<ChannelRow, 'type' | 'provider'> | undefined;
  /** When the contact last wrote on the channel (any of their threads there). */
  lastInboundAt: Date | null;
}

export async function getSendContext(db: Db, workspaceId: string, contactId: string, channelId: string): Promise<SendContext> {
  const result = await sql<{
    contact_id: string | null;
    phone: string | null;
    instagram_id: string | null;
    whatsapp_user_id: string | null;
    channel_id: string | null;
    type: ChannelRow['type'] | null;
    provider: ChannelRow['provider'] | null;
    last_inbound_at: Date | null;
  }>`
    select co.id as contact_id, co.phone, co.instagram_id, co.whatsapp_user_id, ch.id as channel_id, ch.type, ch.provider,
           (select max(t.last_inbound_at) from threads t
             where t.workspace_id = ${workspaceId} and t.contact_id = ${contactId} and t.channel_id = ${channelId}) as last_inbound_at
      from (select 1) as one
      left join contacts co on co.workspace_id = ${workspaceId} and co.id = ${contactId} and co.erased_at is null
      left join channels ch on ch.workspace_id = ${workspaceId} and ch.id = ${channelId}`.execute(db);
  const row = result.rows[0]!;
  return {
    contact: row.contact_id ? { phone: row.phone, instagram_id: row.instagram_id, whatsapp_user_id: row.whatsapp_user_id } : undefined,
    channel: row.channel_id ? { type: row.type!, provider: row.provider! } : undefined,
    lastInboundAt: row.last_inbound_at,
  };
}
