// In the conversation: what a message may answer (replyTo), the buttons and lists it may offer (the
// limits the contract cannot say), our reactions on a message, and marking the customer's messages
// read (with typing). Reactions and reads are actions on a message, never messages: each is queued
// on the contact's delivery order (jobs/kinds.ts ConversationAction), sent by channels/conversation.ts.
import type { components } from '../../generated/api.js';
import { SYSTEM, type Actor } from '../actor.js';
import { withinMessagingWindow } from './channel-rules.js';
import { transact, type Db } from '../db/database.js';
import { messageRowToMessage, type Message } from '../db/messages.js';
import type { ChannelType, Reaction } from '../db/schema.js';
import { findQuoted, latestMetaInbound, lockInboundReactionTarget, lockReactionTarget, reactionsChange, rememberReactions } from '../db/conversation.js';
import { getThread, type Thread } from '../db/threads.js';
import { ApiError, notFound } from '../errors.js';
import type { ConversationAction } from '../jobs/kinds.js';
import { enqueue } from '../jobs/queue.js';
import { moveMessage } from './message-statuses.js';

type InteractiveCreate = components['schemas']['InteractiveCreate'];

/** WhatsApp's most rows of a list message, all its sections together. */
export const MAX_LIST_ROWS = 10;

const invalid = (path: string, message: string): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path, message }]);

const unsupported = (path: string, message: string, what: string): ApiError => new ApiError(422, 'unsupported_on_channel', what, [{ path, message }]);

/**
 * Meta's limits of buttons and lists that a schema cannot say (the contract says the others): ids
 * (and button titles) unique in the message, 10 rows in all, a title for each section of a list of several. A 400
 * naming the field; then what the channel cannot carry (a list on Instagram), a 422.
 */
export function checkInteractive(interactive: InteractiveCreate, channelType: ChannelType): void {
  if (interactive.type === 'buttons') {
    const ids = new Set<string>();
    const titles = new Set<string>();
    interactive.buttons.forEach((button, i) => {
      if (ids.has(button.id)) throw invalid(`/body/interactive/buttons/${i}/id`, 'must be unique among the buttons of the message');
      if (titles.has(button.title)) throw invalid(`/body/interactive/buttons/${i}/title`, 'must be unique among the buttons of the message');
      ids.add(button.id);
      titles.add(button.title);
    });
    return;
  }
  const seen = new Set<string>();
  let rows = 0;
  interactive.sections.forEach((section, s) => {
    if (interactive.sections.length > 1 && section.title === undefined) {
      throw invalid(`/body/interactive/sections/${s}/title`, 'is required when the list has more than one section');
    }
    section.rows.forEach((row, r) => {
      rows++;
      if (rows > MAX_LIST_ROWS) throw invalid(`/body/interactive/sections/${s}/rows/${r}`, `a list holds at most ${MAX_LIST_ROWS} rows in all its sections`);
      if (seen.has(row.id)) throw invalid(`/body/interactive/sections/${s}/rows/${r}/id`, 'must be unique among the rows of the list');
      seen.add(row.id);
    });
  });
  if (channelType === 'instagram') {
    throw unsupported('/body/interactive/type', 'lists are a WhatsApp feature', 'Instagram has no list messages; send buttons instead.');
  }
}

/**
 * The message `replyTo` names, when it is one the reply may quote: of the workspace, the same
 * contact and channel, and known to the channel (an `externalId`). Otherwise 422 `invalid_reply`
 * (an unknown id, another workspace's, another contact's or channel's, one not sent yet).
 */
export async function checkReplyTo(db: Db, workspaceId: string, replyTo: string, contactId: string, channelId: string): Promise<void> {
  const quoted = await findQuoted(db, workspaceId, replyTo);
  const why = !quoted
    ? 'no message with this id'
    : quoted.contact_id !== contactId || quoted.channel_id !== channelId
      ? 'the message is of another contact or channel'
      : quoted.external_id === null
        ? 'the message has not reached the channel (it has no externalId yet)'
        : undefined;
  if (why)
    throw new ApiError(422, 'invalid_reply', 'The message to reply to is not one of this contact on this channel.', [{ path: '/body/replyTo', message: why }]);
}

/** Whether `text` is one emoji: a single grapheme that is pictographic, a flag or a keycap. */
export function isOneEmoji(text: string): boolean {
  const graphemes = [...new Intl.Segmenter('en', { granularity: 'grapheme' }).segment(text)];
  return graphemes.length === 1 && /\p{Extended_Pictographic}|\p{Regional_Indicator}|\u20e3/u.test(text);
}

/** A message's reactions with the one of `direction` replaced by `emoji` (removed when empty); at most one per direction. */
export function withReaction(reactions: Reaction[], direction: Reaction['direction'], emoji: string, now: Date): Reaction[] {
  const others = reactions.filter((r) => r.direction !== direction);
  return emoji === '' ? others : [...others, { emoji, direction, createdAt: now.toISOString() }];
}

/** A message's reactions replaced, with its message.updated (services/message-statuses.ts records it), in one statement. */
async function setReactions(
  trx: Db,
  message: { workspace_id: string; id: string },
  reactions: Reaction[],
  actor: Actor,
  now: Date,
  reactionIds?: string[],
): Promise<void> {
  const change = reactionsChange(trx, message, JSON.stringify(reactions), reactionIds);
  await moveMessage(trx, message.workspace_id, change, actor, { now });
}

/** Queues an action on a message, in the order of the contact's deliveries on the channel; in the caller's transaction. */
export async function enqueueAction(
  db: Db,
  message: { workspace_id: string; id: string; channel_id: string; contact_id: string },
  action: ConversationAction,
  now: Date,
): Promise<void> {
  await enqueue(
    db,
    'message-delivery',
    { messageId: message.id, action },
    { workspaceId: message.workspace_id, orderingKey: `${message.channel_id}:${message.contact_id}`, createdAt: now },
  );
}

/**
 * Our reaction on a message (`""` removes it): recorded on the message (message.updated) and queued
 * for WhatsApp, in one transaction; the reaction it already has (or `""` on none) changes nothing,
 * and records and sends nothing. 404 for a message the workspace lacks; 422 on Instagram, for a
 * message not on the channel yet (no externalId) or of an erased contact, or outside the window.
 */
export async function reactToMessage(db: Db, workspaceId: string, messageId: string, emoji: string, actor: Actor): Promise<Message> {
  if (emoji !== '' && !isOneEmoji(emoji)) throw invalid('/body/emoji', 'must be one emoji, or "" to remove the reaction');
  return transact(db, async (trx) => {
    const now = new Date();
    const found = await lockReactionTarget(trx, workspaceId, messageId);
    const row = found.rows[0];
    if (!row) throw notFound('Message');
    if (row.channel_type === 'instagram') {
      throw unsupported('/path/id', 'the message is on an Instagram channel', 'Instagram does not take reactions from this API.');
    }
    if (row.erased)
      throw new ApiError(422, 'invalid_reference', 'The contact was erased.', [{ path: '/path/id', message: 'the message is of an erased contact' }]);
    if (row.external_id === null) {
      throw new ApiError(422, 'invalid_reference', 'The message has not reached the channel yet.', [
        { path: '/path/id', message: 'the message has no externalId yet: react once it is sent' },
      ]);
    }
    if (row.provider === 'meta' && !withinMessagingWindow(row.last_inbound_at, now)) {
      throw new ApiError(422, 'outside_messaging_window', 'The contact last wrote on this channel more than 24 hours ago (or never).', [
        { path: '/path/id', message: `a reaction needs the contact to have written within 24 hours (last: ${row.last_inbound_at?.toISOString() ?? 'never'})` },
      ]);
    }
    // The reaction it has already (or none, to remove none): nothing changes, nothing is recorded or sent.
    const current = row.reactions.find((r) => r.direction === 'outbound')?.emoji ?? '';
    if (emoji === current) return messageRowToMessage(row);
    const reactions = withReaction(row.reactions, 'outbound', emoji, now);
    await setReactions(trx, row, reactions, actor, now);
    if (row.provider === 'meta') await enqueueAction(trx, row, { type: 'reaction', emoji }, now);
    return messageRowToMessage({ ...row, reactions });
  });
}

/**
 * Our reaction that Meta refused for good (or after every attempt), taken off the message again,
 * with its message.updated by the system: the message shows what the customer sees. Not when the
 * message bears another reaction of ours by now (a newer one, whose own send decides), nor for a
 * refused removal (the reaction it removed is not known any more). True when the message changed.
 */
export async function withdrawRefusedReaction(db: Db, workspaceId: string, messageId: string, emoji: string): Promise<boolean> {
  if (emoji === '') return false;
  return transact(db, async (trx) => {
    const row = (await lockReactionTarget(trx, workspaceId, messageId)).rows[0];
    if (!row || row.reactions.find((r) => r.direction === 'outbound')?.emoji !== emoji) return false;
    const now = new Date();
    await setReactions(trx, row, withReaction(row.reactions, 'outbound', '', now), SYSTEM, now);
    return true;
  });
}

/**
 * The customer's latest inbound message of the thread, marked read at Meta (and typing shown),
 * through the delivery queue; nothing to send on a sandbox channel or without an inbound message.
 * Undefined for a thread the workspace lacks.
 */
export async function markThreadRead(db: Db, workspaceId: string, threadId: string, typing: boolean): Promise<Thread | undefined> {
  return transact(db, async (trx) => {
    const thread = await getThread(trx, workspaceId, threadId);
    if (!thread) return undefined;
    await queueRead(trx, workspaceId, threadId, typing, new Date());
    return thread;
  });
}

/** Queues marking the thread's latest inbound message read (with typing), when its channel is Meta's; in the caller's transaction. */
export async function queueRead(db: Db, workspaceId: string, threadId: string, typing: boolean, now: Date): Promise<boolean> {
  const latest = await latestMetaInbound(db, workspaceId, threadId);
  if (!latest) return false;
  await enqueueAction(db, latest, { type: 'read', typing }, now);
  return true;
}

/** The customer reactions' ids a message remembers: enough for Meta's retries, which come within hours. */
const REMEMBERED_REACTIONS = 20;

/**
 * A customer's reaction (webhook) on the message it names, of this channel and this customer:
 * their reaction replaced (removed when `emoji` is null), with message.updated by the system. A
 * reaction applied before (its provider id remembered on the message: Meta's retry, even after a
 * newer reaction) or that changes nothing records nothing; an unknown message is ignored.
 * True when the message changed.
 */
export async function applyInboundReaction(
  trx: Db,
  channel: { workspace_id: string; id: string },
  event: {
    targetExternalId: string;
    externalId?: string | undefined;
    from: { phone?: string; whatsappUserId?: string } | { instagramId: string };
    emoji: string | null;
  },
  actor: Actor,
  now: Date,
): Promise<boolean> {
  const row = await lockInboundReactionTarget(trx, channel, event.targetExternalId, event.from);
  if (!row || (event.externalId !== undefined && row.reaction_ids.includes(event.externalId))) return false;
  const ids = event.externalId === undefined ? undefined : [...row.reaction_ids, event.externalId].slice(-REMEMBERED_REACTIONS);
  const before = row.reactions.find((r) => r.direction === 'inbound');
  if ((before?.emoji ?? null) === event.emoji) {
    if (ids) await rememberReactions(trx, row, ids);
    return false;
  }
  await setReactions(trx, row, withReaction(row.reactions, 'inbound', event.emoji ?? '', now), actor, now, ids);
  return true;
}
