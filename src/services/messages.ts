// Sending a message: Meta's rules first (reachable contact, 24-hour window, templates), then append
// to the open thread of (contact, channel), or open one for it (with its history and the channel's
// default agent), with its delivery job, in one transaction. message.created is recorded here only,
// for sent and inbound messages alike.
import type { components } from '../../generated/api.js';
import { withinMessagingWindow, templateContent } from '../channels/rules.js';
import type { Actor } from '../actor.js';
import { transact, type Db } from '../db/database.js';
import { appendToOpenThread, getSendContext, insertMessage, messageRowToMessage, type Message, type OutboundMessage } from '../db/messages.js';
import type { MessageRow } from '../db/schema.js';
import { contactIsLive } from '../db/threads.js';
import { ApiError, invalidReference } from '../errors.js';
import { enqueueDelivery } from '../jobs/deliveries.js';
import { recordEvent } from '../events/record.js';
import { openThread } from './threads.js';

type MessageCreate = components['schemas']['MessageCreate'];

const MAX_ATTEMPTS = 5;

/** The one emitter of message.created: a message `actor` added (sent, or a customer's inbound one); in its transaction. */
export async function messageCreated(trx: Db, workspaceId: string, row: MessageRow, actor: Actor, now: Date): Promise<void> {
  await recordEvent(trx, workspaceId, 'message.created', messageRowToMessage(row), actor, now);
}

/** Throws the 422 that Meta's rules give this message, if any. */
async function checkSendable(db: Db, workspaceId: string, input: MessageCreate, now: Date): Promise<void> {
  const context = await getSendContext(db, workspaceId, input.contactId, input.channelId);
  if (!context.contact) throw invalidReference('contactId', 'contact');
  if (!context.channel) throw invalidReference('channelId', 'channel');
  const { type, provider } = context.channel;
  if (input.template && type === 'instagram') {
    throw new ApiError(422, 'template_not_supported', 'Instagram has no message templates; send content instead.', [
      { path: '/body/template', message: 'templates are a WhatsApp feature' },
    ]);
  }
  if (provider === 'sandbox') return;
  const reachable = type === 'whatsapp' ? context.contact.phone : context.contact.instagram_id;
  if (!reachable) {
    throw new ApiError(422, 'invalid_reference', `The contact cannot be reached on ${type === 'whatsapp' ? 'WhatsApp' : 'Instagram'}.`, [
      { path: '/body/contactId', message: type === 'whatsapp' ? 'the contact has no phone' : 'the contact has no Instagram id (they must write first)' },
    ]);
  }
  if (!input.template && !withinMessagingWindow(context.lastInboundAt, now)) {
    throw new ApiError(422, 'outside_messaging_window', 'The contact last wrote on this channel more than 24 hours ago (or never); send a template instead.', [
      {
        path: '/body/content',
        message: `free text needs the contact to have written within 24 hours (last: ${context.lastInboundAt?.toISOString() ?? 'never'})`,
      },
    ]);
  }
}

/**
 * The common case (an open thread exists) appends in one statement. Otherwise a thread is opened
 * with the message; when a concurrent send opened it first, the unique index makes this insert a
 * no-op and the message goes into the winner's thread on the next attempt. The delivery job
 * commits with the message, so a 201 is never lost. `author.agentId` marks an AI agent's answer.
 */
export async function sendMessage(db: Db, workspaceId: string, input: MessageCreate, actor: Actor, author: { agentId?: string } = {}): Promise<Message> {
  await checkSendable(db, workspaceId, input, new Date());
  // The contract lets exactly one of content and template through.
  const message: OutboundMessage = input.template
    ? { contactId: input.contactId, channelId: input.channelId, content: templateContent(input.template), template: input.template, agentId: author.agentId }
    : { contactId: input.contactId, channelId: input.channelId, content: input.content!, agentId: author.agentId };
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const now = new Date();
    const row = await transact(db, async (trx) => {
      let stored = await appendToOpenThread(trx, workspaceId, message, now);
      if (!stored) {
        const thread = await openThread(trx, workspaceId, { ...message, lastMessageAt: now }, now, actor);
        if (!thread) return undefined;
        stored = await insertMessage(trx, workspaceId, thread.id, message, now);
      }
      await enqueueDelivery(trx, stored);
      await messageCreated(trx, workspaceId, stored, actor, now);
      return stored;
    });
    if (row) return messageRowToMessage(row);
    // No thread could be opened: a concurrent send opened it (next attempt appends), or the contact was erased meanwhile.
    if (!(await contactIsLive(db, workspaceId, message.contactId))) throw invalidReference('contactId', 'contact');
  }
  throw new Error(`no open thread for contact ${message.contactId} and channel ${message.channelId} after ${MAX_ATTEMPTS} attempts`);
}
