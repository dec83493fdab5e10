// Receiving: what a customer writes, and what the provider says about our messages, stored. The
// mirror of sending (services/messages.ts): a channel adapter (channels/inbound.ts, Meta's webhook
// and the sandbox) checks and parses a delivery, then hands its events here. A customer's message
// is received in named steps, in the caller's transaction: not already stored (per provider
// message id), its contact (contactOfSender: the one place a sender is matched to a contact), an
// NPS score answered on its asked thread, else the open thread of (contact, channel) found or
// opened, the message inserted, its files held for fetching, the thread's inbound times moved and
// message.created recorded (whose consumers run its automations, in this transaction, and queue an
// AI agent's reply).
import { SYSTEM } from '../actor.js';
import type { InboundEvent } from './inbound-events.js';
import { transact, type Db } from '../db/database.js';
import { channelWithNext, sameChannelRow } from '../db/channels.js';
import { contactKeyLocks, lockContactKeys } from '../db/contacts.js';
import { externalIdExists, inboundContext, insertInboundOnThread } from '../db/messages.js';
import type { ChannelRow, MessageRow } from '../db/schema.js';
import { holdInboundMedia, pendingFiles } from '../media/inbound.js';
import { phoneForms, storedPhone } from '../phones.js';
import { changeWhatsappUserId, findOrCreateInboundContact, type SenderSeen } from './contacts.js';
import { prepareInline, type InlineParts } from '../events/fan-out.js';
import { messageCreated } from './messages.js';
import { answerInConversation, scoreOfReply } from './nps-requests.js';
import { applyStatus, holdEarlyStatus, type ProviderStatus } from './provider-statuses.js';
import { openThreadId } from './threads.js';
import { applyInboundReaction } from './conversation.js';

/** A customer's message as a channel adapter parsed it. */
export type ReceivedMessage = Extract<InboundEvent, { kind: 'message' }>;

/** What became of a received message: stored (on its thread, or as an NPS answer), or stored before. */
export type Received = { kind: 'stored'; message: MessageRow } | { kind: 'duplicate' };

export interface ReceivedEvents {
  messages: MessageRow[];
  duplicates: number;
  /** Statuses applied; stale (they would move a message back); of unknown messages, held a while. */
  statuses: Record<'applied' | 'stale' | 'unknown', number>;
}

/**
 * The contact who wrote `message` on `channel` (services/contacts.ts findOrCreateInboundContact):
 * on WhatsApp by BSUID, then by phone (either form of a Brazilian mobile); on Instagram by the
 * Instagram-scoped id; or created (contact.created, by the system) named as the provider names them.
 * `seen`: the sender's keys held and first looked up by the caller (receiveMessage).
 */
export async function contactOfSender(trx: Db, channel: ChannelRow, message: ReceivedMessage, now: Date, seen?: SenderSeen): Promise<string> {
  return findOrCreateInboundContact(trx, channel.workspace_id, { ...message.from, name: message.name }, now, seen);
}

/**
 * Whether a WhatsApp message is stored already, who sent it and their open thread, in one round trip
 * (db/messages.ts inboundContext): the sender's keys held (lockContactKeys, as findOrCreateInboundContact
 * holds them: two messages of one customer go one after the other) with the statement that reads
 * them. Undefined on Instagram (its steps below read these one by one).
 */
async function whatsappContext(trx: Db, channel: ChannelRow, message: ReceivedMessage) {
  if ('instagramId' in message.from) return undefined;
  const { whatsappUserId, phone } = message.from;
  await lockContactKeys(trx, channel.workspace_id, contactKeyLocks({ whatsappUserId, phone }), { withNext: true });
  return inboundContext(trx, channel.workspace_id, channel.id, message.externalId, {
    whatsappUserId,
    ...(phone !== undefined && { phoneForms: phoneForms(phone), storedPhone: storedPhone(phone) }),
  });
}

/**
 * Receives a customer's message on `channel`, in the caller's transaction (the steps above); a
 * provider id already stored on the channel is a duplicate, stored once. `inline`: the event log's
 * inline parts prepared for the transaction (its automations run in it).
 */
export async function receiveMessage(trx: Db, channel: ChannelRow, message: ReceivedMessage, now: Date, inline?: InlineParts): Promise<Received> {
  const workspaceId = channel.workspace_id;
  const context = await whatsappContext(trx, channel, message);
  if (context ? context.duplicate : await externalIdExists(trx, workspaceId, channel.id, message.externalId)) return { kind: 'duplicate' };
  const contactId = await contactOfSender(trx, channel, message, now, context);
  const score = scoreOfReply(message);
  const answer = score === undefined ? undefined : await answerInConversation(trx, channel, contactId, message, score, now);
  if (answer?.kind === 'duplicate') return answer;
  if (answer) return { kind: 'stored', message: answer.message };
  // The thread read with the sender is theirs when the sender is the contact read; a contact just
  // created (no key found anyone, and the keys are held) has none.
  const read = context?.contact?.id === contactId;
  const created = context !== undefined && context.byBsuid === null && context.byPhone === null;
  const known = read ? context.threadId : null;
  const thread = known
    ? { id: known, opened: false }
    : await openThreadId(trx, workspaceId, contactId, channel.id, now, SYSTEM, { knownNone: read || created, withNext: true });
  const threadId = thread.id;
  const files = pendingFiles(message.media);
  const sentAt = message.sentAt && message.sentAt < now ? message.sentAt : now;
  // The message stored and the thread's inbound times moved, in one statement.
  const row = await insertInboundOnThread(
    trx,
    workspaceId,
    {
      threadId,
      contactId,
      channelId: channel.id,
      content: message.content,
      externalId: message.externalId,
      attachments: files.map((f) => f.attachment),
      // What it quotes (reply_to when the quoted message is known here) and the button or row it tapped.
      replyToExternalId: message.replyToExternalId,
      interactive: message.reply && { reply: message.reply },
    },
    now,
    sentAt,
  );
  if (!row) return { kind: 'duplicate' };
  await holdInboundMedia(trx, workspaceId, { channelId: channel.id, contactId, messageId: row.id }, files, now);
  // Its event travels with the transaction's next statement or its COMMIT: no round trip of its own.
  // The automations it triggers run right after it, in this transaction, unless one of the thread's
  // is still queued (automations/inline.ts).
  await messageCreated(trx, workspaceId, row, SYSTEM, now, { withNext: true, threadOpened: thread.opened, inline });
  return { kind: 'stored', message: row };
}

/**
 * Applies a provider's status of one of our messages on `channelId` (message.updated, by the
 * system): `applied`, `stale` (the message is already at or past it), or `unknown` (no message has
 * that provider id yet: the status is held and looked at again, services/provider-statuses.ts).
 */
export async function applyProviderStatus(
  trx: Db,
  workspaceId: string,
  channelId: string,
  status: ProviderStatus,
  now: Date,
): Promise<'applied' | 'stale' | 'unknown'> {
  const outcome = await applyStatus(trx, workspaceId, channelId, status, now);
  if (outcome === 'unknown') await holdEarlyStatus(trx, workspaceId, channelId, status, now);
  return outcome;
}

/** The channel a delivery was checked against is no longer the stored one (changed or deleted): nothing was stored. */
export class ChannelChanged extends Error {
  constructor() {
    super('the channel changed while its delivery was received');
  }
}

/**
 * Receives the events of one delivery on `channel` in one transaction: all of them are stored,
 * with their API events (by the system), or none. With `confirmChannel` (a row the caller may hold
 * from an earlier request), the channel is read again with the transaction's first statement (no
 * round trip of its own) and nothing is stored, ChannelChanged thrown, unless it is still `channel`.
 */
export async function receiveEvents(
  db: Db,
  channel: ChannelRow,
  events: InboundEvent[],
  { confirmChannel = false }: { confirmChannel?: boolean } = {},
): Promise<ReceivedEvents> {
  const received: ReceivedEvents = { messages: [], duplicates: 0, statuses: { applied: 0, stale: 0, unknown: 0 } };
  if (events.length === 0) return received;
  await transact(db, async (trx) => {
    const stored = confirmChannel ? await channelWithNext(trx, channel.id) : undefined;
    // Whether the workspace has automations to run inline, read with the first statement too.
    const inline = events.some((event) => event.kind === 'message') ? await prepareInline(trx, channel.workspace_id) : undefined;
    /** A delivery checked against an older row of its channel stores nothing. */
    const confirm = async (): Promise<void> => {
      const current = stored && (await stored.rows())[0];
      if (stored && !(current && sameChannelRow(current, channel))) throw new ChannelChanged();
    };
    try {
      for (const event of events) {
        const now = new Date();
        if (event.kind === 'status') {
          received.statuses[await applyProviderStatus(trx, channel.workspace_id, channel.id, event, now)]++;
          continue;
        }
        if (event.kind === 'user_id_changed') {
          await changeWhatsappUserId(trx, channel.workspace_id, event.previous, event.current, now);
          continue;
        }
        if (event.kind === 'reaction') {
          // Never a message: the customer's reaction annotates the message it names (services/conversation.ts).
          await applyInboundReaction(trx, channel, event, SYSTEM, now);
          continue;
        }
        const outcome = await receiveMessage(trx, channel, event, now, inline);
        if (outcome.kind === 'duplicate') received.duplicates++;
        else received.messages.push(outcome.message);
      }
    } catch (err) {
      // A statement may fail because the channel changed (deleted: its rows' foreign keys).
      if (stored) await confirm().catch((changed: unknown) => Promise.reject(changed instanceof ChannelChanged ? changed : err));
      throw err;
    }
    // Before the COMMIT.
    await confirm();
  });
  return received;
}
