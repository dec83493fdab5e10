// The inbound side of the channels: a Meta webhook delivery checked (its channel, its signature)
// and parsed (channels/webhook.ts), or a sandbox inbound checked, then received by the service
// (services/receive.ts: contacts, threads, messages, statuses) in one transaction, or item by item
// when the database refuses one item; idempotent per provider message id.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import { findChannelById, sameChannelRow } from '../db/channels.js';
import type { Db } from '../db/database.js';
import { messageRowToMessage, type Message } from '../db/messages.js';
import type { ChannelRow } from '../db/schema.js';
import type { InboundEvent } from '../services/inbound-events.js';
import { ChannelChanged, receiveEvents, type ReceivedEvents } from '../services/receive.js';
import { ApiError, notFound } from '../errors.js';
import { MAX_JSON_DEPTH, scanJson } from '../json-scan.js';
import type { Logger } from '../logger.js';
import type { SecretBox } from '../secrets.js';
import { openMetaSecrets, type MetaSecrets } from './settings.js';
import { parseMetaWebhook, signatureMatches } from './webhook.js';

type SandboxInbound = components['schemas']['SandboxInbound'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PHONE = /^\+[1-9]\d{7,14}$/;
const INSTAGRAM_ID = /^[0-9A-Za-z_.-]+$/;

/**
 * Meta channels as a delivery last found them, by id: a delivery is checked against its channel's
 * row from here, and that row is confirmed with the delivery's first statement (receiveEvents'
 * confirmChannel) instead of read in a round trip of its own; a signature this row refuses is
 * checked again against the stored row (receiveMetaDelivery). Bounded; a process's own.
 */
const channels = new Map<string, ChannelRow>();
const MAX_CHANNELS = 1_000;

function remember(channel: ChannelRow): void {
  if (channels.size >= MAX_CHANNELS) channels.clear();
  channels.set(channel.id, channel);
}

/**
 * The meta channel a webhook names; 404 for a malformed id, an unknown channel or a sandbox one.
 * `cached`: as a delivery last found it (it may have changed since: receiveMetaDelivery confirms it).
 */
export async function webhookChannel(db: Db, channelId: string, { cached = false } = {}): Promise<ChannelRow> {
  const known = cached ? channels.get(channelId) : undefined;
  if (known) return known;
  const channel = UUID.test(channelId) ? await findChannelById(db, channelId) : undefined;
  if (!channel || channel.provider !== 'meta') {
    channels.delete(channelId);
    throw notFound('Channel');
  }
  remember(channel);
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

/** Each box's opened Meta secrets by their sealed text (a new seal, as a rotation's, is opened anew); bounded. */
const opened = new WeakMap<SecretBox, Map<string, MetaSecrets>>();
const MAX_OPENED = 1_000;

/** The channel's Meta secrets, opened once per sealed value rather than on every delivery (openMetaSecrets). */
function deliverySecrets(box: SecretBox | undefined, channel: ChannelRow): MetaSecrets {
  if (!box || !channel.secrets) return openMetaSecrets(box, channel);
  let byBox = opened.get(box);
  if (!byBox) opened.set(box, (byBox = new Map<string, MetaSecrets>()));
  let secrets = byBox.get(channel.secrets);
  if (!secrets) {
    secrets = openMetaSecrets(box, channel);
    if (byBox.size >= MAX_OPENED) byBox.clear();
    byBox.set(channel.secrets, secrets);
  }
  return secrets;
}

/**
 * A delivery for a channel: 401 unless its signature is the channel's; then its events are stored.
 * A signed body this service does not understand is logged and stored nothing. `log` gives the
 * request's logger, called only when something is logged (a child logger costs ~40 µs to make).
 * `channel` may be as an earlier delivery found it (webhookChannel `cached`): a signature it refuses
 * is checked against the stored row before the 401, and the delivery is stored only while the
 * stored row is still the one it was checked against (else it is checked again against that one).
 */
export async function receiveMetaDelivery(
  db: Db,
  box: SecretBox | undefined,
  channel: ChannelRow,
  raw: Buffer,
  signature: string | undefined,
  log: () => Logger,
): Promise<ReceivedEvents | undefined> {
  let checked = channel;
  if (!signatureMatches(deliverySecrets(box, checked).appSecret, raw, signature)) {
    // Its secret may have changed since the row was read.
    const stored = await webhookChannel(db, channel.id);
    if (sameChannelRow(stored, channel) || !signatureMatches(deliverySecrets(box, stored).appSecret, raw, signature)) {
      throw new ApiError(401, 'invalid_signature', signature ? 'X-Hub-Signature-256 does not match the body.' : 'X-Hub-Signature-256 is missing.');
    }
    checked = stored;
  }
  try {
    return await receiveSigned(db, checked, raw, log, true);
  } catch (err) {
    if (!(err instanceof ChannelChanged)) throw err;
  }
  // Changed (or deleted) since: checked again against the row stored now, and stored without a
  // confirmation (as a delivery whose channel changes after its row was read always was).
  const stored = await webhookChannel(db, channel.id);
  if (!signatureMatches(deliverySecrets(box, stored).appSecret, raw, signature)) {
    throw new ApiError(401, 'invalid_signature', signature ? 'X-Hub-Signature-256 does not match the body.' : 'X-Hub-Signature-256 is missing.');
  }
  return receiveSigned(db, stored, raw, log, false);
}

/** A delivery whose signature is `channel`'s: parsed, and its events stored. */
async function receiveSigned(db: Db, channel: ChannelRow, raw: Buffer, log: () => Logger, confirmChannel: boolean): Promise<ReceivedEvents | undefined> {
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
    log().warn({ channelId: channel.id, bytes: raw.length, object: shape }, 'webhook delivery not understood; stored nothing');
    return undefined;
  }
  if (parsed.ignored.length > 0)
    log().info({ channelId: channel.id, ignored: reasonCounts(parsed.ignored), count: parsed.ignored.length }, 'webhook delivery: parts ignored');
  return storeDelivery(db, channel, parsed.events, log, confirmChannel);
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
async function storeDelivery(db: Db, channel: ChannelRow, events: InboundEvent[], log: () => Logger, confirmChannel: boolean): Promise<ReceivedEvents> {
  try {
    return await receiveEvents(db, channel, events, { confirmChannel });
  } catch (err) {
    if (!isRefusedValue(err)) throw err;
  }
  const stored: ReceivedEvents = { messages: [], duplicates: 0, statuses: { applied: 0, stale: 0, unknown: 0 } };
  for (const [index, event] of events.entries()) {
    try {
      const one = await receiveEvents(db, channel, [event], { confirmChannel });
      stored.messages.push(...one.messages);
      stored.duplicates += one.duplicates;
      for (const outcome of ['applied', 'stale', 'unknown'] as const) stored.statuses[outcome] += one.statuses[outcome];
    } catch (err) {
      if (!isRefusedValue(err)) throw err;
      log().warn({ channelId: channel.id, item: index, kind: event.kind, sqlstate: err.code }, 'webhook delivery: an item the database refused was skipped');
    }
  }
  return stored;
}

/** A customer's message on a sandbox channel, received as a real inbound one is (services/receive.ts). */
export async function receiveSandboxInbound(db: Db, workspaceId: string, channel: ChannelRow | undefined, input: SandboxInbound): Promise<Message> {
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
  const stored = await receiveEvents(db, { ...channel, workspace_id: workspaceId }, [event]);
  return messageRowToMessage(stored.messages[0]!);
}
