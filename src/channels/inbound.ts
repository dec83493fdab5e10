// What customers write, and what Meta says about our messages, stored: a webhook delivery (checked,
// read, applied in one transaction, or item by item when the database refuses one item; idempotent
// per provider message id) or a sandbox inbound.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import { SYSTEM } from '../actor.js';
import { enqueueReply, type AiReplies } from '../ai/replies.js';
import { findChannelById } from '../db/channels.js';
import { transact, type Db } from '../db/database.js';
import { externalIdExists, insertInboundMessage, messageRowToMessage, type Message } from '../db/messages.js';
import type { ChannelRow, MessageRow } from '../db/schema.js';
import { recordInbound } from '../db/threads.js';
import { ApiError, notFound } from '../errors.js';
import { MAX_JSON_DEPTH, scanJson } from '../json-scan.js';
import type { Logger } from '../logger.js';
import { findOrCreateContact } from '../services/contacts.js';
import { messageCreated } from '../services/messages.js';
import { answerInConversation, scoreOfReply } from '../services/nps-requests.js';
import { openThreadId } from '../services/threads.js';
import type { SecretBox } from '../secrets.js';
import { holdInboundMedia, pendingFiles } from '../media/inbound.js';
import { applyStatus, holdEarlyStatus } from './statuses.js';
import { openMetaSecrets } from './settings.js';
import { parseMetaWebhook, signatureMatches, type InboundEvent } from './webhook.js';

type SandboxInbound = components['schemas']['SandboxInbound'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PHONE = /^\+[1-9]\d{7,14}$/;
const INSTAGRAM_ID = /^[0-9A-Za-z_.-]+$/;

export interface StoredEvents {
  messages: MessageRow[];
  duplicates: number;
  /** Statuses applied; stale (they would move a message back); of unknown messages, held a while. */
  statuses: Record<'applied' | 'stale' | 'unknown', number>;
}

/**
 * Applies the events of one delivery in one transaction: all of them are stored, with their API
 * events (by the system: a customer's message and Meta's statuses), or none. A score while the
 * pair's NPS question is pending answers it on the asked thread (services/nps-requests.ts). With
 * `ai`, each thread that got messages queues its agent's reply to the last of them (NPS answers
 * left out), in the same transaction.
 */
export async function storeInboundEvents(db: Db, channel: ChannelRow, events: InboundEvent[], ai?: AiReplies): Promise<StoredEvents> {
  const stored: StoredEvents = { messages: [], duplicates: 0, statuses: { applied: 0, stale: 0, unknown: 0 } };
  if (events.length === 0) return stored;
  // A score that answered an NPS question is thanked, not answered by the thread's AI agent.
  const npsAnswers = new Set<string>();
  await transact(db, async (trx) => {
    for (const event of events) {
      const now = new Date();
      if (event.kind === 'status') {
        const outcome = await applyStatus(trx, channel.workspace_id, channel.id, event, now);
        if (outcome === 'unknown') await holdEarlyStatus(trx, channel.workspace_id, channel.id, event, now);
        stored.statuses[outcome]++;
        continue;
      }
      if (await externalIdExists(trx, channel.workspace_id, channel.id, event.externalId)) {
        stored.duplicates++;
        continue;
      }
      const name = event.name ?? ('phone' in event.from ? event.from.phone : `Instagram ${event.from.instagramId}`);
      const contactId = await findOrCreateContact(trx, channel.workspace_id, event.from, name, now, SYSTEM);
      const score = scoreOfReply(event);
      const answer = score === undefined ? undefined : await answerInConversation(trx, channel, contactId, event, score, now);
      if (answer?.kind === 'duplicate') {
        stored.duplicates++;
        continue;
      }
      if (answer) {
        stored.messages.push(answer.message);
        npsAnswers.add(answer.message.id);
        continue;
      }
      const threadId = await openThreadId(trx, channel.workspace_id, contactId, channel.id, now, SYSTEM);
      const files = pendingFiles(event.media);
      const row = await insertInboundMessage(
        trx,
        channel.workspace_id,
        { threadId, contactId, channelId: channel.id, content: event.content, externalId: event.externalId, attachments: files.map((f) => f.attachment) },
        now,
      );
      if (!row) {
        stored.duplicates++;
        continue;
      }
      await holdInboundMedia(trx, channel.workspace_id, { channelId: channel.id, contactId, messageId: row.id }, files, now);
      const sentAt = event.sentAt && event.sentAt < now ? event.sentAt : now;
      await recordInbound(trx, channel.workspace_id, threadId, now, sentAt);
      await messageCreated(trx, channel.workspace_id, row, SYSTEM, now);
      stored.messages.push(row);
    }
    if (ai) {
      const latest = new Map(stored.messages.filter((m) => !npsAnswers.has(m.id)).map((m) => [m.thread_id, m]));
      for (const message of latest.values()) await enqueueReply(trx, ai, channel.workspace_id, message);
    }
  });
  return stored;
}

/** The meta channel a webhook names; 404 for a malformed id, an unknown channel or a sandbox one. */
export async function webhookChannel(db: Db, channelId: string): Promise<ChannelRow> {
  const channel = UUID.test(channelId) ? await findChannelById(db, channelId) : undefined;
  if (!channel || channel.provider !== 'meta') throw notFound('Channel');
  return channel;
}

/** Meta's verification: the challenge when the token is the channel's verifyToken, else 403. */
export function verifyChallenge(box: SecretBox | undefined, channel: ChannelRow, query: Record<string, unknown>): string {
  const { verifyToken } = openMetaSecrets(box, channel);
  const challenge = query['hub.challenge'];
  if (query['hub.mode'] !== 'subscribe' || query['hub.verify_token'] !== verifyToken || typeof challenge !== 'string') {
    throw new ApiError(403, 'forbidden', 'The verify token does not match this channel.');
  }
  return challenge;
}

/**
 * A delivery for a channel: 401 unless its signature is the channel's; then its events are stored.
 * A signed body this service does not understand is logged and stored nothing.
 */
export async function receiveMetaDelivery(
  db: Db,
  box: SecretBox | undefined,
  channel: ChannelRow,
  raw: Buffer,
  signature: string | undefined,
  log: Logger,
  ai?: AiReplies,
): Promise<StoredEvents | undefined> {
  const { appSecret } = openMetaSecrets(box, channel);
  if (!signatureMatches(appSecret, raw, signature)) {
    throw new ApiError(401, 'invalid_signature', signature ? 'X-Hub-Signature-256 does not match the body.' : 'X-Hub-Signature-256 is missing.');
  }
  let body: unknown;
  // Nested deeper than anything Meta sends: not parsed at all, as the API's bodies (see json-scan.ts).
  const tooDeep = scanJson(raw).tooDeep;
  let json = !tooDeep;
  try {
    if (json) body = JSON.parse(raw.toString('utf8'));
  } catch {
    json = false;
  }
  const parsed = json ? parseMetaWebhook(body, { type: channel.type, externalId: channel.external_id }) : undefined;
  if (!parsed) {
    // Its shape, not its content: a delivery holds customers' messages.
    const object = typeof body === 'object' && body !== null ? (body as { object?: unknown }).object : undefined;
    const shape = tooDeep ? `nested deeper than ${MAX_JSON_DEPTH} levels` : !json ? 'not JSON' : typeof object === 'string' ? object.slice(0, 64) : typeof body;
    log.warn({ channelId: channel.id, bytes: raw.length, object: shape }, 'webhook delivery not understood; stored nothing');
    return undefined;
  }
  if (parsed.ignored.length > 0)
    log.info({ channelId: channel.id, ignored: reasonCounts(parsed.ignored), count: parsed.ignored.length }, 'webhook delivery: parts ignored');
  return storeDelivery(db, channel, parsed.events, log, ai);
}

/** Each distinct reason once, with how many parts it left out (at most 20 reasons). */
function reasonCounts(reasons: string[]): string[] {
  const counts = new Map<string, number>();
  for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  return [...counts].slice(0, 20).map(([reason, count]) => (count > 1 ? `${reason} (${count} times)` : reason));
}

/**
 * Whether the database refused a value itself (SQLSTATE class 22, data exception, or 54, program
 * limit exceeded, as an index entry too large): the same item fails on every retry. A broken
 * connection, a timeout or a serialization failure is not one: those may pass on Meta's retry.
 */
function isRefusedValue(err: unknown): err is { code: string } {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^(22|54)[0-9A-Z]{3}$/.test(code);
}

/**
 * A delivery's events stored in one transaction; when the database refuses a value the parser let
 * through, each event is stored on its own instead and those refused are skipped and logged (by
 * position and kind: never their content), so one bad item cannot fail the delivery on every retry.
 * Any other failure is thrown: the delivery is answered 5xx and Meta sends it again.
 */
async function storeDelivery(db: Db, channel: ChannelRow, events: InboundEvent[], log: Logger, ai?: AiReplies): Promise<StoredEvents> {
  try {
    return await storeInboundEvents(db, channel, events, ai);
  } catch (err) {
    if (!isRefusedValue(err)) throw err;
  }
  const stored: StoredEvents = { messages: [], duplicates: 0, statuses: { applied: 0, stale: 0, unknown: 0 } };
  for (const [index, event] of events.entries()) {
    try {
      // With its own reply to queue: a later message of the thread makes an earlier reply's job a no-op.
      const one = await storeInboundEvents(db, channel, [event], ai);
      stored.messages.push(...one.messages);
      stored.duplicates += one.duplicates;
      for (const outcome of ['applied', 'stale', 'unknown'] as const) stored.statuses[outcome] += one.statuses[outcome];
    } catch (err) {
      if (!isRefusedValue(err)) throw err;
      log.warn({ channelId: channel.id, item: index, kind: event.kind, sqlstate: err.code }, 'webhook delivery: an item the database refused was skipped');
    }
  }
  return stored;
}

/** A customer's message on a sandbox channel, stored as a real inbound one is. */
export async function receiveSandboxInbound(
  db: Db,
  workspaceId: string,
  channel: ChannelRow | undefined,
  input: SandboxInbound,
  ai?: AiReplies,
): Promise<Message> {
  if (!channel || channel.provider !== 'sandbox') throw notFound('Channel');
  const valid = channel.type === 'whatsapp' ? PHONE.test(input.from) : INSTAGRAM_ID.test(input.from);
  if (!valid) {
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      {
        path: '/body/from',
        message: channel.type === 'whatsapp' ? 'must be an E.164 phone on a WhatsApp channel' : 'must be an Instagram-scoped id on an Instagram channel',
      },
    ]);
  }
  const event: InboundEvent = {
    kind: 'message',
    externalId: `sandbox.${uuidv7()}`,
    from: channel.type === 'whatsapp' ? { phone: input.from } : { instagramId: input.from },
    name: input.name,
    content: input.content,
  };
  const stored = await storeInboundEvents(db, { ...channel, workspace_id: workspaceId }, [event], ai);
  return messageRowToMessage(stored.messages[0]!);
}
