// Sending a message: Meta's rules first (reachable contact, 24-hour window, templates, files the
// channel carries), then append
// to the open thread of (contact, channel), or open one for it (with its history and the channel's
// default agent), with its delivery job, in one transaction. message.created is recorded here only,
// for sent and inbound messages alike.
import type { components } from '../../generated/api.js';
import { templateContent, whatsappUnreachable, withinMessagingWindow } from './channel-rules.js';
import { automationOf, type Actor } from '../actor.js';
import { transact, type Db } from '../db/database.js';
import { appendToOpenThread, appendToThread, getSendContext, insertMessage, messageRowToMessage, type Message, type OutboundMessage } from '../db/messages.js';
import type { MessageRow } from '../db/schema.js';
import { contactIsLive } from '../db/threads.js';
import { ApiError, invalidReference } from '../errors.js';
import { enqueue } from '../jobs/queue.js';
import { recordEvent } from '../events/record.js';
import type { InlineParts } from '../events/fan-out.js';
import { openThread } from './threads.js';
import { findStoredMedia, mediaRowToAttachment } from '../db/media.js';
import type { Attachment, ChannelType } from '../db/schema.js';
import { channelRefuses } from '../media/types.js';
import * as sla from '../sla/clocks.js';
import { getAgentType } from '../db/agents.js';
import { checkInteractive, checkReplyTo } from './conversation.js';

type MessageCreate = components['schemas']['MessageCreate'];

const MAX_ATTEMPTS = 5;

/** The delivery job of a new outbound message (channels/deliveries.ts runs it), ordered per (channel, contact); in the message's transaction. */
async function enqueueDelivery(db: Db, message: MessageRow): Promise<void> {
  await enqueue(
    db,
    'message-delivery',
    { messageId: message.id },
    { workspaceId: message.workspace_id, orderingKey: `${message.channel_id}:${message.contact_id}`, createdAt: message.created_at },
  );
}

/**
 * The one emitter of message.created: a message `actor` added (sent, or a customer's inbound one),
 * after its thread's service levels followed it; in its transaction. `answered`: a customer's message
 * the service answered itself (an NPS score); `nps`: the NPS question or thanks (never a response);
 * `threadOpened`: its thread was opened for it in this transaction (its clocks are known);
 * `withNext`: the event's statement travels with the transaction's next one or its COMMIT (recordEvent);
 * `inline`: the event's inline parts prepared for this transaction (recordEvent): what they do runs in it, right after the event.
 */
export async function messageCreated(
  trx: Db,
  workspaceId: string,
  row: MessageRow,
  actor: Actor,
  now: Date,
  options: { answered?: boolean; nps?: boolean; withNext?: boolean; threadOpened?: boolean; inline?: InlineParts } = {},
): Promise<void> {
  await sla.onMessage(trx, row, actor, options);
  await recordEvent(trx, workspaceId, 'message.created', messageRowToMessage(row), actor, now, {
    answered: options.answered,
    withNext: options.withNext,
    inline: options.inline,
  });
}

/**
 * The files of `attachments` as each message will show it, in order; 422 for one the workspace has
 * not stored (unknown, another workspace's, still pending, failed or erased) or the channel cannot carry.
 */
async function attachmentsToSend(db: Db, workspaceId: string, input: MessageCreate, channelType: ChannelType): Promise<Attachment[]> {
  const refs = input.attachments ?? [];
  const rows = new Map((await findStoredMedia(db, workspaceId, [...new Set(refs.map((r) => r.mediaId))])).map((row) => [row.id, row]));
  return refs.map((ref, i) => {
    const row = rows.get(ref.mediaId);
    if (!row) {
      throw new ApiError(422, 'invalid_reference', 'The media file does not exist (upload it with POST /media first).', [
        { path: `/body/attachments/${i}/mediaId`, message: 'no stored media file with this id' },
      ]);
    }
    const refused = channelRefuses(channelType, { type: row.type, mimeType: row.mime_type, size: Number(row.size) });
    if (refused) {
      throw new ApiError(422, 'attachment_not_supported', `The channel cannot carry this ${row.type}.`, [
        { path: `/body/attachments/${i}/mediaId`, message: refused },
      ]);
    }
    // Instagram shows a file without words: a caption would be stored and never seen.
    if (channelType === 'instagram' && ref.caption !== undefined) {
      throw new ApiError(422, 'attachment_not_supported', 'Instagram carries no caption with a file; send the text as content.', [
        { path: `/body/attachments/${i}/caption`, message: 'Instagram takes no captions' },
      ]);
    }
    return mediaRowToAttachment(row, ref.caption ?? null);
  });
}

/** Throws the 422 that Meta's rules give this message, if any; the files it sends. */
async function checkSendable(db: Db, workspaceId: string, input: MessageCreate, now: Date): Promise<Attachment[]> {
  const context = await getSendContext(db, workspaceId, input.contactId, input.channelId);
  if (!context.contact) throw invalidReference('contactId', 'contact');
  if (!context.channel) throw invalidReference('channelId', 'channel');
  if (input.agentId !== undefined && (await getAgentType(db, workspaceId, input.agentId)) !== 'human') {
    throw new ApiError(422, 'invalid_reference', 'The agent does not exist or is not a person.', [
      { path: '/body/agentId', message: 'no human agent with this id' },
    ]);
  }
  const { type, provider } = context.channel;
  const attachments = await attachmentsToSend(db, workspaceId, input, type);
  if (input.template && type === 'instagram') {
    throw new ApiError(422, 'template_not_supported', 'Instagram has no message templates; send content instead.', [
      { path: '/body/template', message: 'templates are a WhatsApp feature' },
    ]);
  }
  const unreachable =
    type === 'whatsapp' &&
    whatsappUnreachable(context.contact, {
      path: '/body/contactId',
      message: 'the contact has no phone and no whatsappUserId (they must write first, or be given a phone)',
    });
  if (unreachable) throw unreachable;
  if (input.interactive) checkInteractive(input.interactive, type);
  if (input.replyTo) await checkReplyTo(db, workspaceId, input.replyTo, input.contactId, input.channelId);
  if (provider === 'sandbox') return attachments;
  if (type === 'instagram' && !context.contact.instagram_id) {
    throw new ApiError(422, 'invalid_reference', 'The contact cannot be reached on Instagram.', [
      { path: '/body/contactId', message: 'the contact has no Instagram id (they must write first)' },
    ]);
  }
  if (!input.template && !withinMessagingWindow(context.lastInboundAt, now)) {
    const instead = type === 'whatsapp' ? 'send a template instead' : 'Instagram has no templates: wait for the contact to write';
    throw new ApiError(422, 'outside_messaging_window', `The contact last wrote on this channel more than 24 hours ago (or never); ${instead}.`, [
      {
        path: input.interactive ? '/body/interactive' : input.content === undefined ? '/body/attachments' : '/body/content',
        message: `free text and files need the contact to have written within 24 hours (last: ${context.lastInboundAt?.toISOString() ?? 'never'})`,
      },
    ]);
  }
  return attachments;
}

/**
 * A message of buttons or a list: its body is its content; on Instagram the buttons also go as
 * quick replies (their payload the button's id), as the NPS question's do.
 */
function interactiveMessage(pair: Omit<OutboundMessage, 'content'>, interactive: NonNullable<MessageCreate['interactive']>): OutboundMessage {
  return {
    ...pair,
    content: interactive.body,
    interactive,
    ...(interactive.type === 'buttons' && { quickReplies: interactive.buttons.map((b) => ({ title: b.title, payload: b.id })) }),
  };
}

/** The messages after the first of one send, in its thread, in order (UUIDv7 ids order those of one instant). */
async function insertMore(trx: Db, workspaceId: string, threadId: string, messages: OutboundMessage[], now: Date): Promise<MessageRow[]> {
  const rows: MessageRow[] = [];
  for (const message of messages) rows.push(await insertMessage(trx, workspaceId, threadId, message, now));
  return rows;
}

/**
 * Sends a message on a given thread, open or closed (the NPS question and its thanks belong to the
 * thread that was asked), with its delivery job and its message.created, in the caller's
 * transaction. Its messages are NPS messages: they never count as a response (sla/clocks.ts). Meta's rules are the caller's to check. Undefined when the contact was erased.
 */
export async function sendOnThread(
  trx: Db,
  workspaceId: string,
  threadId: string,
  message: OutboundMessage,
  actor: Actor,
  now: Date,
): Promise<MessageRow | undefined> {
  const row = await appendToThread(trx, workspaceId, threadId, { ...message, automationId: automationOf(actor) }, now);
  if (!row) return undefined;
  await enqueueDelivery(trx, row);
  await messageCreated(trx, workspaceId, row, actor, now, { nps: true });
  return row;
}

/**
 * The common case (an open thread exists) appends in one statement. Otherwise a thread is opened
 * with the message; when a concurrent send opened it first, the unique index makes this insert a
 * no-op and the message goes into the winner's thread on the next attempt. The delivery job
 * commits with the message, so a 201 is never lost. `author.agentId` marks an AI agent's answer.
 */
export async function sendMessage(db: Db, workspaceId: string, input: MessageCreate, actor: Actor, author: { agentId?: string } = {}): Promise<Message> {
  const attachments = await checkSendable(db, workspaceId, input, new Date());
  const agentId = author.agentId ?? input.agentId?.toLowerCase();
  const pair = { contactId: input.contactId, channelId: input.channelId, agentId, automationId: automationOf(actor) };
  // The contract lets a template alone through, buttons or a list alone, or content and/or attachments: the text first, then each file.
  const messages: OutboundMessage[] = input.template
    ? [{ ...pair, content: templateContent(input.template), template: input.template }]
    : input.interactive
      ? [interactiveMessage(pair, input.interactive)]
      : [
          ...(input.content !== undefined ? [{ ...pair, content: input.content }] : []),
          ...attachments.map((attachment) => ({ ...pair, content: attachment.caption, attachments: [attachment] })),
        ];
  // A reply quotes with its first message.
  const [first, ...more] = messages as [OutboundMessage, ...OutboundMessage[]];
  const message: OutboundMessage = input.replyTo ? { ...first, replyTo: input.replyTo } : first;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const now = new Date();
    const row = await transact(db, async (trx) => {
      let stored = await appendToOpenThread(trx, workspaceId, message, now);
      if (!stored) {
        const thread = await openThread(trx, workspaceId, { ...message, lastMessageAt: now }, now, actor);
        if (!thread) return undefined;
        stored = await insertMessage(trx, workspaceId, thread.id, message, now);
      }
      for (const row of [stored, ...(await insertMore(trx, workspaceId, stored.thread_id, more, now))]) {
        await enqueueDelivery(trx, row);
        await messageCreated(trx, workspaceId, row, actor, now);
      }
      return stored;
    });
    if (row) return messageRowToMessage(row);
    // No thread could be opened: a concurrent send opened it (next attempt appends), or the contact was erased meanwhile.
    if (!(await contactIsLive(db, workspaceId, message.contactId))) throw invalidReference('contactId', 'contact');
  }
  throw new Error(`no open thread for contact ${message.contactId} and channel ${message.channelId} after ${MAX_ATTEMPTS} attempts`);
}
