// NPS asked in the conversation: the workspace's question sent on a thread (quick replies 0..10 on
// Instagram; text in WhatsApp's window, its template outside), and the customer's score taken from
// their next message while the request is pending (the answer, then the thanks, on the asked
// thread even when it is closed). Which reply is a score is a pure rule, tested without I/O.
import type { Actor } from '../actor.js';
import { SYSTEM } from '../actor.js';
import { templateContent, whatsappUnreachable, withinMessagingWindow } from './channel-rules.js';
import type { InboundEvent } from './inbound-events.js';
import { transact, type Db } from '../db/database.js';
import { externalIdExists, getSendContext, insertInboundMessage, type OutboundMessage } from '../db/messages.js';
import type { ChannelRow, MessageRow, QuickReply, ThreadRow } from '../db/schema.js';
import { lockLatestNpsRequest, readThreadForChange, recordInbound, setNpsRequested, threadRowToThread, type Thread } from '../db/threads.js';
import { ApiError, notFound } from '../errors.js';
import { messageCreated, sendOnThread } from './messages.js';
import { answerNps } from './nps.js';
import { loadSettings } from './settings.js';

const HOUR_MS = 60 * 60 * 1000;

/** The question's buttons on Instagram: titles `0`..`10`, payloads `NPS_0`..`NPS_10`. */
export const NPS_QUICK_REPLIES: readonly QuickReply[] = Object.freeze(Array.from({ length: 11 }, (_, n) => ({ title: String(n), payload: `NPS_${n}` })));

const SCORE_TEXT = /^([\s\p{P}]*)(\d{1,2})[\s\p{P}]*$/u;
const DASH = /\p{Pd}/u;
const SCORE_PAYLOAD = /^NPS_(\d{1,2})$/;

const inRange = (digits: string): number | undefined => {
  const score = Number(digits);
  return score <= 10 ? score : undefined;
};

/**
 * The score a text gives: only an integer 0..10, with spaces and punctuation around it ("9",
 * " 10! ", "10.", "(8)"); undefined for anything else ("obrigado", "10 reais", "11", "9/10", "1.5").
 * A dash before the number makes it negative ("-1"), not a score.
 */
export function scoreOfText(text: string): number | undefined {
  const match = SCORE_TEXT.exec(text);
  if (!match || DASH.test(match[1]!)) return undefined;
  return inRange(match[2]!);
}

/** The score of a quick reply's payload `NPS_<n>` (n 0..10); undefined for any other payload. */
export function scoreOfPayload(payload: string): number | undefined {
  const match = SCORE_PAYLOAD.exec(payload);
  return match ? inRange(match[1]!) : undefined;
}

/**
 * The score a customer's message gives: the question's quick reply, else its text; a message with
 * files is not a score (a photo captioned "9" is a photo).
 */
export function scoreOfReply(reply: {
  content: string | null;
  quickReplyPayload?: string | undefined;
  media?: readonly unknown[] | undefined;
}): number | undefined {
  const fromButton = reply.quickReplyPayload === undefined ? undefined : scoreOfPayload(reply.quickReplyPayload);
  if (fromButton !== undefined) return fromButton;
  if (reply.content === null || (reply.media?.length ?? 0) > 0) return undefined;
  return scoreOfText(reply.content);
}

/** Whether a request sent at `requestedAt` still waits for its answer at `now` (it expires `expiresAfterHours` later). */
export function npsRequestPending(requestedAt: Date | null, now: Date, expiresAfterHours: number): boolean {
  return requestedAt !== null && now.getTime() - requestedAt.getTime() < expiresAfterHours * HOUR_MS;
}

const contactErased = (): ApiError =>
  new ApiError(422, 'invalid_reference', "The thread's contact was erased.", [{ path: '/path/id', message: 'the contact of this thread was erased' }]);

/** The question as it goes out on the thread's channel, or the 422 Meta's rules give it. */
async function questionFor(
  trx: Db,
  workspaceId: string,
  thread: ThreadRow,
  nps: { question: string; template: { name: string; language: string } | null },
  now: Date,
): Promise<OutboundMessage> {
  const context = await getSendContext(trx, workspaceId, thread.contact_id, thread.channel_id);
  if (!context.contact) throw contactErased();
  const { type, provider } = context.channel!;
  const pair = { contactId: thread.contact_id, channelId: thread.channel_id };
  const text: OutboundMessage = { ...pair, content: nps.question, ...(type === 'instagram' && { quickReplies: [...NPS_QUICK_REPLIES] }) };
  // As any message to WhatsApp: checked before the window, on sandbox channels too.
  const noRecipient =
    type === 'whatsapp' && whatsappUnreachable(context.contact, { path: '/path/id', message: 'the contact of this thread has no phone and no whatsappUserId' });
  if (noRecipient) throw noRecipient;
  if (provider === 'sandbox') return text;
  // An Instagram contact without an Instagram id never wrote there: outside the window, as one who wrote too long ago.
  const lastInboundAt = type === 'instagram' && !context.contact.instagram_id ? null : context.lastInboundAt;
  if (withinMessagingWindow(lastInboundAt, now)) return text;
  if (type === 'whatsapp' && nps.template) return { ...pair, content: templateContent(nps.template), template: nps.template };
  throw new ApiError(
    422,
    'outside_messaging_window',
    type === 'whatsapp'
      ? 'The contact last wrote on this channel more than 24 hours ago (or never), and the workspace has no NPS template (settings nps.template).'
      : 'The contact last wrote on this channel more than 24 hours ago (or never); Instagram has no templates.',
    [
      {
        path: '/path/id',
        message: `the question needs the contact to have written within 24 hours (last: ${lastInboundAt?.toISOString() ?? 'never'})`,
      },
    ],
  );
}

/**
 * Sends the workspace's NPS question (settings `nps`) on the thread and marks the request pending
 * (`npsRequestedAt`), with the question's delivery job and message.created by `actor`, in one
 * transaction: the caller's when `trx` is one (transact), so an automation's action commits with
 * its run. The thread row is locked first, so of two requests at once one asks and the other is a
 * 409. Throws ApiError 404 (no such thread), 409 `conflict` (answered already, or asked and still
 * pending), 422 `outside_messaging_window`, `contact_unreachable` (WhatsApp, neither phone nor BSUID) or
 * `invalid_reference` (contact erased), each before anything is written.
 */
export async function requestNps(trx: Db, workspaceId: string, threadId: string, actor: Actor): Promise<Thread> {
  return transact(trx, async (t) => {
    const read = await readThreadForChange(t, workspaceId, threadId, { lock: true });
    if (!read) throw notFound('Thread');
    const thread = read.row;
    if (thread.nps_score !== null) throw new ApiError(409, 'conflict', 'This thread already has an NPS answer.');
    const { nps } = await loadSettings(t, workspaceId);
    const now = new Date();
    if (npsRequestPending(thread.nps_requested_at, now, nps.expiresAfterHours)) {
      const until = new Date(thread.nps_requested_at!.getTime() + nps.expiresAfterHours * HOUR_MS);
      throw new ApiError(409, 'conflict', 'The NPS question was already sent on this thread and waits for its answer.', [
        { path: '/path/id', message: `asked at ${thread.nps_requested_at!.toISOString()}, pending until ${until.toISOString()}` },
      ]);
    }
    const question = await questionFor(t, workspaceId, thread, nps, now);
    const sent = await sendOnThread(t, workspaceId, thread.id, question, actor, now);
    if (!sent) throw contactErased();
    return threadRowToThread(await setNpsRequested(t, workspaceId, thread.id, now));
  });
}

/** What became of a customer's score (services/receive.ts): stored as the answer of an asked thread, or a delivery already stored. */
export type ConversationAnswer = { kind: 'answered'; message: MessageRow } | { kind: 'duplicate' };

/**
 * A customer's message that is a score (scoreOfReply), while the pair has a pending request:
 * stored as an inbound message of the asked thread (open or closed; its status stays), the
 * answer registered (nps.answered, `source: conversation`, by the system) and the workspace's
 * thanks sent on that thread, in the caller's transaction. Undefined when no request is pending
 * (none, answered, or expired): the message flows as any other. The asked thread is locked, so of
 * two scores at once the first answers and the second finds it answered (an ordinary message),
 * and a message id Meta delivers twice is stored once.
 */
export async function answerInConversation(
  trx: Db,
  channel: ChannelRow,
  contactId: string,
  event: Extract<InboundEvent, { kind: 'message' }>,
  score: number,
  now: Date,
): Promise<ConversationAnswer | undefined> {
  const workspaceId = channel.workspace_id;
  const asked = await lockLatestNpsRequest(trx, workspaceId, contactId, channel.id);
  if (!asked) return undefined;
  const { nps } = await loadSettings(trx, workspaceId);
  if (!npsRequestPending(asked.nps_requested_at, now, nps.expiresAfterHours)) return undefined;
  // A concurrent delivery of the same message may have committed while this one waited for the lock.
  if (await externalIdExists(trx, workspaceId, channel.id, event.externalId)) return { kind: 'duplicate' };
  const row = await insertInboundMessage(
    trx,
    workspaceId,
    {
      threadId: asked.id,
      contactId,
      channelId: channel.id,
      content: event.content,
      externalId: event.externalId,
      // As any customer's message (receive.ts): what it quotes (the question, often) and the quick reply it tapped.
      replyToExternalId: event.replyToExternalId,
      interactive: event.reply && { reply: event.reply },
    },
    now,
  );
  if (!row) return { kind: 'duplicate' };
  const sentAt = event.sentAt && event.sentAt < now ? event.sentAt : now;
  await recordInbound(trx, workspaceId, asked.id, now, sentAt);
  // Thanked below: no agent answers it.
  await messageCreated(trx, workspaceId, row, SYSTEM, now, { answered: true });
  await answerNps(trx, workspaceId, asked.id, score, now, SYSTEM, 'conversation');
  await sendOnThread(trx, workspaceId, asked.id, { contactId, channelId: channel.id, content: nps.thanks }, SYSTEM, now);
  return { kind: 'answered', message: row };
}
