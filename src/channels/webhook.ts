// Meta's webhook deliveries read into events, as the WhatsApp Cloud API (`entry[].changes[].value`
// with messages, statuses and contacts) and the Instagram Messaging API (`entry[].messaging[]`)
// document them; and the X-Hub-Signature-256 check over the raw body. Pure: no I/O. A part for
// another Meta account than the channel's, or one the database could not store as sent, is left
// out on its own with the reason, so the rest of the delivery is stored.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ChannelType, MediaType } from '../db/schema.js';
import type { InboundMedia } from '../media/inbound.js';
import type { InboundEvent } from '../services/inbound-events.js';
import { cleanFilename } from '../text.js';

/** A business-scoped user id as Meta documents it: country code, `.ENT` for a parent BSUID, then 1-128 letters and digits. */
export const BSUID = /^[A-Z]{2}(\.ENT)?\.[A-Za-z0-9]{1,128}$/;
/** A WhatsApp username as shown (Meta's format restrictions keep it short); longer is not kept. */
const MAX_USERNAME_CHARS = 64;

export interface ParsedDelivery {
  events: InboundEvent[];
  /** What was left out and why (logged, never stored): reasons, never a customer's content. */
  ignored: string[];
}

/**
 * The longest provider id kept, in UTF-8 bytes. Meta's ids are far shorter; a message's id is a
 * key of a btree index (messages_external_id_key), whose entries must fit a third of a page.
 */
export const MAX_PROVIDER_ID_BYTES = 1024;
/** A contact name longer than this (in characters) is refused by the contacts API: not kept either. */
const MAX_NAME_CHARS = 200;

/** Whether `header` is `sha256=` and the hex HMAC-SHA256 of `body` under `appSecret`, compared in constant time. */
export function signatureMatches(appSecret: string, body: Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const expected = Buffer.from(`sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`);
  const given = Buffer.from(header.trim().toLowerCase());
  return given.length === expected.length && timingSafeEqual(given, expected);
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const objects = (value: unknown): Json[] => (Array.isArray(value) ? value.filter(isObject) : []);
const text = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() !== '' ? value : undefined);

/**
 * Whether PostgreSQL keeps `value` exactly as sent: it refuses U+0000 in text and jsonb (SQLSTATE
 * 22021), and a lone surrogate would turn into U+FFFD.
 */
const storable = (value: string): boolean => value.isWellFormed() && !value.includes('\u0000');
/** A provider id (wamid, mid) the database can store and index, or undefined. */
const storableId = (value: string | undefined): string | undefined =>
  value !== undefined && Buffer.byteLength(value) <= MAX_PROVIDER_ID_BYTES && storable(value) ? value : undefined;
/** Metadata (a profile name, Meta's words about an error) that cannot be stored counts as absent. */
const storableOrNone = (value: string | undefined): string | undefined => (value !== undefined && storable(value) ? value : undefined);
/** An id of Meta's in a reason that is logged: short, whatever was sent. */
const clip = (value: string): string => (value.length > 64 ? `${value.slice(0, 64)}…` : value);
const INSTAGRAM_SCOPED_ID = /^[0-9A-Za-z_.-]{1,64}$/;
const UNSTORABLE_TEXT = 'holds U+0000 or a lone surrogate, so it cannot be stored as sent';

/** A Unix timestamp in seconds (WhatsApp, as a string) or milliseconds (Instagram). */
function instant(value: unknown): Date | undefined {
  const n = typeof value === 'string' ? Number(value) : typeof value === 'number' ? value : NaN;
  if (!Number.isFinite(n) || n <= 0) return undefined;
  const date = new Date(n < 1e12 ? n * 1000 : n);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

const labelled = (kind: string, detail?: string): string => (detail ? `[${kind}] ${detail}` : `[${kind}]`);

/** How a WhatsApp message of any type reads as text: the text itself, or `[kind] caption`. */
export function whatsappContent(message: Json): string {
  const type = text(message.type) ?? 'unknown';
  const part = isObject(message[type]) ? message[type] : {};
  switch (type) {
    case 'text':
      return text(part.body) ?? labelled('text');
    case 'image':
    case 'video':
    case 'audio':
    case 'sticker':
      return labelled(type, text(part.caption));
    case 'document':
      return labelled(type, text(part.caption) ?? text(part.filename));
    case 'location': {
      const where = [text(part.name), text(part.address)].filter(Boolean).join(', ');
      const coordinates = typeof part.latitude === 'number' && typeof part.longitude === 'number' ? `(${part.latitude}, ${part.longitude})` : '';
      return labelled(type, [where, coordinates].filter(Boolean).join(' '));
    }
    case 'contacts': {
      const names = objects(message.contacts)
        .map((c) => (isObject(c.name) ? text(c.name.formatted_name) : undefined))
        .filter(Boolean);
      return labelled(type, names.join(', '));
    }
    case 'button':
      return text(part.text) ?? text(part.payload) ?? labelled(type);
    case 'interactive': {
      const reply = isObject(part.button_reply) ? part.button_reply : isObject(part.list_reply) ? part.list_reply : {};
      return text(reply.title) ?? labelled(type);
    }
    case 'reaction':
      return labelled(type, text(part.emoji));
    default:
      return labelled(type);
  }
}

/**
 * What a customer tapped, as WhatsApp's messages webhook reports it: a reply button
 * (`interactive.button_reply`), a list row (`interactive.list_reply`), both `{id, title}`, or a
 * template's quick-reply button (`type: button`, `button: {payload, text}`).
 */
function whatsappReply(message: Json): { id: string; title: string } | undefined {
  const part = isObject(message[text(message.type) ?? '']) ? (message[text(message.type)!] as Json) : undefined;
  if (!part) return undefined;
  if (message.type === 'button') {
    const id = text(part.payload);
    const title = text(part.text) ?? id;
    return id && title ? { id, title } : undefined;
  }
  if (message.type !== 'interactive') return undefined;
  const reply = isObject(part.button_reply) ? part.button_reply : isObject(part.list_reply) ? part.list_reply : undefined;
  const id = reply && text(reply.id);
  const title = reply && text(reply.title);
  return id && title ? { id, title } : undefined;
}

/** A reply's id and title the database can keep, or undefined. */
const storableReply = (reply: { id: string; title: string } | undefined): { id: string; title: string } | undefined =>
  reply && storableId(reply.id) && storable(reply.title) ? reply : undefined;

const WHATSAPP_MEDIA: ReadonlySet<string> = new Set(['image', 'video', 'audio', 'document', 'sticker']);
const MEDIA_ID = /^[0-9A-Za-z_.-]{1,128}$/;

/** The file of a WhatsApp image, video, audio (voice note), document or sticker message, or undefined. */
function whatsappMedia(message: Json): InboundMedia | undefined {
  const type = text(message.type);
  if (!type || !WHATSAPP_MEDIA.has(type) || !isObject(message[type])) return undefined;
  const part = message[type];
  const id = text(part.id);
  if (!id || !MEDIA_ID.test(id)) return undefined;
  const sha256 = text(part.sha256);
  const filename = cleanFilename(text(part.filename) ?? '');
  return {
    type: type as MediaType,
    mimeType: (text(part.mime_type) ?? 'application/octet-stream').split(';', 1)[0]!.trim().toLowerCase(),
    ...(sha256 && { sha256 }),
    // Cleaned as an upload's name is (no controls, slashes or bidirectional overrides; cut at an Attachment's length).
    ...(filename && { filename }),
    ...(text(part.caption) && { caption: text(part.caption) }),
    source: { whatsappMediaId: id },
  };
}

/** Instagram attachment types that are files, and what each is here; the MIME type until the download tells. */
const INSTAGRAM_MEDIA: Readonly<Record<string, { type: MediaType; mimeType: string }>> = {
  image: { type: 'image', mimeType: 'image/jpeg' },
  video: { type: 'video', mimeType: 'video/mp4' },
  audio: { type: 'audio', mimeType: 'audio/mp4' },
  file: { type: 'document', mimeType: 'application/pdf' },
};

/** The files of an Instagram message's attachments (`payload.url`, https only); others (shares, stories) are not files. */
function instagramMedia(attachments: Json[]): InboundMedia[] {
  return attachments.flatMap((attachment) => {
    const kind = INSTAGRAM_MEDIA[text(attachment.type) ?? ''];
    const url = isObject(attachment.payload) ? text(attachment.payload.url) : undefined;
    if (!kind || !url || url.length > 4096 || !/^https?:\/\//.test(url)) return [];
    return [{ ...kind, source: { url } }];
  });
}

/**
 * The username a WhatsApp profile shows: null when it shows none (Meta leaves the field out then,
 * and a username shown before is cleared), undefined when it cannot be stored (nothing changes).
 */
function shownUsername(profile: Json): string | null | undefined {
  const username = text(profile.username);
  if (username === undefined) return null;
  return storable(username) && username.length <= MAX_USERNAME_CHARS ? username : undefined;
}

function whatsappChange(value: Json, channelExternalId: string | null, out: ParsedDelivery): void {
  // Every messages change names its number; one that does not may be any number's.
  const phoneNumberId = isObject(value.metadata) ? text(value.metadata.phone_number_id) : undefined;
  if (!phoneNumberId) {
    out.ignored.push('a change without metadata.phone_number_id');
    return;
  }
  if (phoneNumberId !== channelExternalId) {
    out.ignored.push(`a change for phone_number_id ${clip(phoneNumberId)}, not this channel's`);
    return;
  }
  // `contacts[]` names each sender: `wa_id` (the phone, when Meta shares it), `user_id` (the BSUID), `profile.name` and `profile.username`.
  const people: Array<{ waId?: string | undefined; userId?: string | undefined; name?: string | undefined; username?: string | null | undefined }> = [];
  for (const contact of objects(value.contacts)) {
    const profile = isObject(contact.profile) ? contact.profile : {};
    let name = text(profile.name);
    if (name && !(storable(name) && (name.length <= MAX_NAME_CHARS || [...name].length <= MAX_NAME_CHARS))) {
      out.ignored.push('a profile name that cannot be stored (U+0000, a lone surrogate, or too long): the phone names the contact');
      name = undefined;
    }
    people.push({
      waId: text(contact.wa_id)?.replace(/^\+/, ''),
      userId: text(contact.user_id),
      name,
      username: isObject(contact.profile) ? shownUsername(contact.profile) : undefined,
    });
  }
  for (const message of objects(value.messages)) {
    const id = text(message.id);
    const rawPhone = text(message.from);
    const phoneDigits = rawPhone && /^\+?[1-9]\d{7,14}$/.test(rawPhone) ? rawPhone.replace(/^\+/, '') : undefined;
    const rawUserId = text(message.from_user_id);
    if (message.type === 'system' && isObject(message.system) && message.system.type === 'user_changed_user_id') {
      const current = text(message.system.user_id);
      if (id && storableId(id) && rawUserId && BSUID.test(rawUserId) && current && BSUID.test(current)) {
        out.events.push({ kind: 'user_id_changed', externalId: id, previous: rawUserId, current });
      } else out.ignored.push('a user_changed_user_id without its id or both BSUIDs');
      continue;
    }
    const person =
      people.find((p) => (rawUserId !== undefined && p.userId === rawUserId) || (phoneDigits !== undefined && p.waId === phoneDigits)) ??
      (people.length === 1 ? people[0] : undefined);
    const userId = rawUserId ?? person?.userId;
    const whatsappUserId = userId && BSUID.test(userId) ? userId : undefined;
    if (userId && !whatsappUserId) out.ignored.push('a sender BSUID that is not one (kept the message by its phone, if any)');
    if (!id || (!phoneDigits && !whatsappUserId)) {
      out.ignored.push('a message without an id or a sender (an E.164 phone or a BSUID)');
      continue;
    }
    if (!storableId(id)) {
      out.ignored.push(`a message whose id cannot be stored (over ${MAX_PROVIDER_ID_BYTES} bytes, U+0000 or a lone surrogate)`);
      continue;
    }
    const media = whatsappMedia(message);
    const content = media ? (media.caption ?? null) : whatsappContent(message);
    if ((content !== null && !storable(content)) || (media?.filename !== undefined && !storable(media.filename))) {
      out.ignored.push(`a message whose text ${UNSTORABLE_TEXT}`);
      continue;
    }
    if (message.type === 'reaction') {
      // A reaction is never a message: it annotates the one it names (removed when it has no emoji).
      const part = isObject(message.reaction) ? message.reaction : {};
      const target = storableId(text(part.message_id));
      if (!target) out.ignored.push('a reaction without the id of its message');
      else
        out.events.push({
          kind: 'reaction',
          targetExternalId: target,
          externalId: id,
          from: { ...(phoneDigits && { phone: `+${phoneDigits}` }), ...(whatsappUserId && { whatsappUserId }) },
          emoji: storableOrNone(text(part.emoji)) ?? null,
        });
      continue;
    }
    const quoted = isObject(message.context) ? storableId(text(message.context.id)) : undefined;
    const reply = storableReply(whatsappReply(message));
    out.events.push({
      kind: 'message',
      externalId: id,
      from: {
        ...(phoneDigits && { phone: `+${phoneDigits}` }),
        ...(whatsappUserId && { whatsappUserId }),
        ...(person?.username !== undefined && { username: person.username }),
      },
      name: person?.name,
      content,
      ...(media && { media: [media] }),
      sentAt: instant(message.timestamp),
      ...(quoted && { replyToExternalId: quoted }),
      ...(reply && { reply }),
    });
  }
  for (const status of objects(value.statuses)) {
    const id = text(status.id);
    const name = text(status.status);
    if (!id || !name) {
      out.ignored.push('a status without an id');
      continue;
    }
    if (!storableId(id) || !storable(name)) {
      out.ignored.push(`a status whose id or status cannot be stored (over ${MAX_PROVIDER_ID_BYTES} bytes, U+0000 or a lone surrogate)`);
      continue;
    }
    const first = objects(status.errors)[0];
    const code = typeof first?.code === 'number' || typeof first?.code === 'string' ? String(first.code) : 'unknown';
    const error = first && {
      code: storable(code) ? code : 'unknown',
      message: [
        storableOrNone(text(first.message)) ?? storableOrNone(text(first.title)) ?? 'failed',
        isObject(first.error_data) ? storableOrNone(text(first.error_data.details)) : undefined,
      ]
        .filter(Boolean)
        .join(': '),
    };
    out.events.push({ kind: 'status', externalId: id, status: name, error });
  }
  for (const error of objects(value.errors)) out.ignored.push(`a WhatsApp error notification (code ${clip(String(error.code))})`);
}

/**
 * The customer (`sender.id`) and the message (`mid` of `part`) of an Instagram event about one of
 * the account's messages (a reaction, a read); undefined, and the event ignored as `what`, when it
 * is not a customer's to this account or names no message.
 */
function customerEventOn(event: Json, part: Json, accountId: string, out: ParsedDelivery, what: string): { sender: string; target: string } | undefined {
  const sender = isObject(event.sender) ? text(event.sender.id) : undefined;
  const recipient = isObject(event.recipient) ? text(event.recipient.id) : undefined;
  const target = storableId(text(part.mid));
  if (recipient !== accountId || !sender || !INSTAGRAM_SCOPED_ID.test(sender) || !target) {
    out.ignored.push(`an Instagram ${what} not from a customer to this account, or without the mid of its message`);
    return undefined;
  }
  return { sender, target };
}

/** An Instagram `reaction` event (`{mid, action: react|unreact, reaction, emoji}`) of a customer to the account. */
function instagramReaction(event: Json, accountId: string, out: ParsedDelivery): void {
  const reaction = event.reaction as Json;
  const about = customerEventOn(event, reaction, accountId, out, 'reaction');
  if (!about) return;
  const { sender, target } = about;
  const emoji = reaction.action === 'unreact' ? undefined : (storableOrNone(text(reaction.emoji)) ?? storableOrNone(text(reaction.reaction)));
  // Instagram names no reaction by an id: its time (ms) and action stand for one, as a repeated delivery repeats them.
  const at = typeof event.timestamp === 'number' || typeof event.timestamp === 'string' ? String(event.timestamp) : undefined;
  const externalId = at && storableId(`ig:${at}:${text(reaction.action) ?? ''}:${emoji ?? ''}`);
  out.events.push({ kind: 'reaction', targetExternalId: target, ...(externalId && { externalId }), from: { instagramId: sender }, emoji: emoji ?? null });
}

/**
 * An Instagram `read` event (`messaging_seen`: `{read: {mid}}`) of a customer to the account: the
 * message it names, the last they saw, is read, as a WhatsApp `read` status says.
 */
function instagramRead(event: Json, accountId: string, out: ParsedDelivery): void {
  const about = customerEventOn(event, event.read as Json, accountId, out, 'read');
  if (about) out.events.push({ kind: 'status', externalId: about.target, status: 'read', error: undefined });
}

function instagramMessaging(event: Json, accountId: string, out: ParsedDelivery): void {
  const message = isObject(event.message) ? event.message : undefined;
  if (!message && isObject(event.reaction)) {
    instagramReaction(event, accountId, out);
    return;
  }
  if (!message && isObject(event.read)) {
    instagramRead(event, accountId, out);
    return;
  }
  if (!message) {
    out.ignored.push(
      `an Instagram event without a message (${
        Object.keys(event)
          .filter((k) => !['sender', 'recipient', 'timestamp'].includes(k))
          .slice(0, 5)
          .map(clip)
          .join(', ') || 'empty'
      })`,
    );
    return;
  }
  if (message.is_echo === true) {
    out.ignored.push('an Instagram echo of a message the account sent');
    return;
  }
  const recipient = isObject(event.recipient) ? text(event.recipient.id) : undefined;
  if (recipient !== accountId) {
    out.ignored.push(recipient ? `an Instagram message to account ${clip(recipient)}, not this channel's` : 'an Instagram message without a recipient');
    return;
  }
  const id = text(message.mid);
  const sender = isObject(event.sender) ? text(event.sender.id) : undefined;
  if (!id || !sender) {
    out.ignored.push('an Instagram message without mid or sender');
    return;
  }
  if (!storableId(id)) {
    out.ignored.push(`an Instagram message whose mid cannot be stored (over ${MAX_PROVIDER_ID_BYTES} bytes, U+0000 or a lone surrogate)`);
    return;
  }
  if (!INSTAGRAM_SCOPED_ID.test(sender)) {
    out.ignored.push('an Instagram message whose sender is not an Instagram-scoped id');
    return;
  }
  const attachments = objects(message.attachments);
  const media = instagramMedia(attachments).slice(0, 10);
  const attachment = attachments[0];
  const content = text(message.text) ?? (media.length > 0 ? null : attachment ? labelled(text(attachment.type) ?? 'attachment') : labelled('message'));
  if (content !== null && !storable(content)) {
    out.ignored.push(`an Instagram message whose text ${UNSTORABLE_TEXT}`);
    return;
  }
  const payload = isObject(message.quick_reply) ? storableOrNone(text(message.quick_reply.payload)) : undefined;
  const quoted = isObject(message.reply_to) ? storableId(text(message.reply_to.mid)) : undefined;
  const reply = payload !== undefined ? storableReply({ id: payload, title: text(message.text) ?? payload }) : undefined;
  out.events.push({
    kind: 'message',
    externalId: id,
    from: { instagramId: sender },
    content,
    ...(media.length > 0 && { media }),
    sentAt: instant(event.timestamp),
    ...(payload !== undefined && { quickReplyPayload: payload }),
    ...(quoted && { replyToExternalId: quoted }),
    ...(reply && { reply }),
  });
}

/**
 * The events of a delivery for a channel of `type` (and Meta id `externalId`), or undefined when
 * the body is not a delivery this service understands at all (logged and answered 200).
 */
export function parseMetaWebhook(body: unknown, channel: { type: ChannelType; externalId: string | null }): ParsedDelivery | undefined {
  if (!isObject(body) || !Array.isArray(body.entry)) return undefined;
  const out: ParsedDelivery = { events: [], ignored: [] };
  if (body.object === 'whatsapp_business_account') {
    if (channel.type !== 'whatsapp') return undefined;
    for (const entry of objects(body.entry)) {
      for (const change of objects(entry.changes)) {
        if (!isObject(change.value) || (change.field !== undefined && change.field !== 'messages')) {
          out.ignored.push(`a change of field ${clip(String(change.field))}`);
          continue;
        }
        whatsappChange(change.value, channel.externalId, out);
      }
    }
    return out;
  }
  if (body.object === 'instagram') {
    if (channel.type !== 'instagram') return undefined;
    for (const entry of objects(body.entry)) {
      // entry.id is the Instagram professional account the entry is for, as recipient.id is.
      const accountId = text(entry.id);
      if (!accountId || accountId !== channel.externalId) {
        out.ignored.push(accountId ? `an entry for Instagram account ${clip(accountId)}, not this channel's` : 'an Instagram entry without an id');
        continue;
      }
      for (const event of objects(entry.messaging)) instagramMessaging(event, accountId, out);
      // Instagram API with Instagram Login may deliver the same event as a `messages` change.
      for (const change of objects(entry.changes)) {
        if (change.field === 'messages' && isObject(change.value)) instagramMessaging(change.value, accountId, out);
        else out.ignored.push(`a change of field ${clip(String(change.field))}`);
      }
    }
    return out;
  }
  return undefined;
}
