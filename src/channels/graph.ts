// Meta's Graph API, as the WhatsApp Cloud API and the Instagram Messaging API document it: the
// request bodies of a text or template message, the send itself, and what a failure means
// (passing, and worth retrying, or permanent).
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Attachment, ChannelType, Interactive } from '../db/schema.js';
import { httpRequest, postJson } from '../outbound/http.js';

/** The most of Graph's answer that is read; a longer one is a network failure. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** Graph error codes that pass: rate limits, temporary unavailability, "try again later". */
export const TRANSIENT_GRAPH_CODES: ReadonlySet<number> = new Set([1, 2, 4, 80007, 130429, 131000, 131016]);

export interface TemplateRef {
  name: string;
  language: string;
  parameters?: string[] | undefined;
}

const BSUID = /^[A-Z]{2}(\.ENT)?\.[A-Za-z0-9]{1,128}$/;

/**
 * Who a WhatsApp message goes to: `to` with a phone (E.164 without its `+`); with a business-scoped
 * user id (BSUID), Meta's `recipient` in its place (Meta's "Business-scoped user IDs": `to` wins when
 * both are sent, so a contact with a phone is always sent to by phone).
 */
export function whatsappAddress(recipient: string): { to: string } | { recipient: string } {
  return BSUID.test(recipient) ? { recipient } : { to: recipient.replace(/^\+/, '') };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: free text to a phone or a BSUID. */
export function whatsappTextBody(recipient: string, content: string): Record<string, unknown> {
  return { messaging_product: 'whatsapp', recipient_type: 'individual', ...whatsappAddress(recipient), type: 'text', text: { body: content } };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: an approved template with body parameters. */
export function whatsappTemplateBody(recipient: string, template: TemplateRef): Record<string, unknown> {
  const parameters = template.parameters ?? [];
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    ...whatsappAddress(recipient),
    type: 'template',
    template: {
      name: template.name,
      language: { code: template.language },
      ...(parameters.length > 0 && { components: [{ type: 'body', parameters: parameters.map((text) => ({ type: 'text', text })) }] }),
    },
  };
}

/** Instagram Messaging API `POST /{ig-id}/messages`: free text to an Instagram-scoped user id. */
export function instagramTextBody(instagramId: string, content: string): Record<string, unknown> {
  return { recipient: { id: instagramId }, message: { text: content } };
}

/**
 * Instagram Messaging API `POST /{ig-id}/messages`: text with quick replies, as Meta's Send API
 * documents them (`messaging_type: RESPONSE`, `message.quick_replies[]` of `content_type: text`
 * with a title of up to 20 characters and the payload Meta's webhook sends back when one is tapped).
 */
export function instagramQuickRepliesBody(
  instagramId: string,
  content: string,
  quickReplies: ReadonlyArray<{ title: string; payload: string }>,
): Record<string, unknown> {
  return {
    recipient: { id: instagramId },
    messaging_type: 'RESPONSE',
    message: { text: content, quick_replies: quickReplies.map(({ title, payload }) => ({ content_type: 'text', title, payload })) },
  };
}

export interface SendFailure {
  transient: boolean;
  /** Graph's error.code as text, or network_error, timeout, http_<status>. */
  code: string;
  message: string;
}

/** Sent; `externalId` is null only if Meta accepted it without naming it (not documented to happen). */
export type SendResult = { ok: true; externalId: string | null } | ({ ok: false } & SendFailure);

interface GraphErrorBody {
  error?: { message?: unknown; type?: unknown; code?: unknown; error_subcode?: unknown; fbtrace_id?: unknown };
}

/**
 * What a non-2xx answer means: HTTP 429 and 5xx pass, and so do the Graph codes of
 * TRANSIENT_GRAPH_CODES; any other Graph error is permanent. A 4xx without a Graph error body is
 * permanent too (the request itself is wrong).
 */
export function classifyGraphFailure(status: number, body: unknown): SendFailure {
  const error = (body as GraphErrorBody | undefined)?.error;
  const code = typeof error?.code === 'number' || typeof error?.code === 'string' ? Number(error.code) : undefined;
  const message = typeof error?.message === 'string' && error.message ? error.message : `Graph API answered HTTP ${status}`;
  const transient = status === 429 || status >= 500 || (code !== undefined && TRANSIENT_GRAPH_CODES.has(code));
  return { transient, code: code !== undefined && Number.isFinite(code) ? String(code) : `http_${status}`, message };
}

/** The provider's id of a sent message: WhatsApp `messages[0].id`, Instagram `message_id`. */
export function sentMessageId(body: unknown): string | undefined {
  const answer = body as { messages?: Array<{ id?: unknown }>; message_id?: unknown } | undefined;
  const id = answer?.messages?.[0]?.id ?? answer?.message_id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * POSTs a message to `{baseUrl}/{externalId}/messages` with the channel's access token. Never
 * throws: a network error or the timeout are passing failures. `signal` aborts it (stopping).
 */
export async function sendGraphMessage(options: {
  baseUrl: string;
  externalId: string;
  accessToken: string;
  body: Record<string, unknown>;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}): Promise<SendResult> {
  const outcome = await postJson(`${options.baseUrl}/${encodeURIComponent(options.externalId)}/messages`, {
    headers: { authorization: `Bearer ${options.accessToken}` },
    body: JSON.stringify(options.body),
    timeoutMs: options.timeoutMs,
    maxBodyBytes: MAX_ANSWER_BYTES,
    signal: options.signal,
  });
  if ('failure' in outcome) {
    if (outcome.failure === 'timeout')
      return { ok: false, transient: true, code: 'timeout', message: `no answer from the Graph API within ${options.timeoutMs} ms` };
    return { ok: false, transient: true, code: 'network_error', message: `the Graph API could not be reached: ${outcome.message}` };
  }
  const { status, text } = outcome;
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  // Accepted is sent: retrying an answer without an id could deliver the message twice.
  if (status >= 200 && status < 300) return { ok: true, externalId: sentMessageId(body) ?? null };
  return { ok: false, ...classifyGraphFailure(status, body) };
}

/** A file as a multipart/form-data part after `fields`, streamed: its boundary, length and body. */
export function multipart(
  fields: Record<string, string>,
  file: { field: string; filename: string; contentType: string; size: number; bytes: Readable },
): { contentType: string; length: number; body: Readable } {
  const boundary = `----support-funnel-${randomBytes(12).toString('hex')}`;
  const quoted = (text: string): string => text.replace(/["\r\n\\]/g, '_');
  const head = Buffer.from(
    Object.entries(fields)
      .map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
      .join('') +
      `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${quoted(file.filename)}"\r\nContent-Type: ${file.contentType}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  async function* parts(): AsyncGenerator<Buffer> {
    yield head;
    for await (const chunk of file.bytes) yield chunk as Buffer;
    yield tail;
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, length: head.length + file.size + tail.length, body: Readable.from(parts()) };
}

/** Instagram's attachment types (Messenger Platform): a document is a `file`. */
const INSTAGRAM_TYPES: Readonly<Record<Attachment['type'], string>> = { image: 'image', video: 'video', audio: 'audio', document: 'file', sticker: 'image' };

/**
 * Uploads a file for a message: WhatsApp `POST /{phone-number-id}/media` (`messaging_product`,
 * `type`, `file`) answers its media `id`; Instagram `POST /{ig-id}/message_attachments` (`platform`
 * instagram, `message` with `is_reusable`, `filedata`) its `attachment_id`. Never throws but for `signal`.
 */
export async function uploadGraphMedia(options: {
  baseUrl: string;
  channelType: ChannelType;
  externalId: string;
  accessToken: string;
  attachment: Attachment;
  bytes: Readable;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}): Promise<{ ok: true; id: string } | ({ ok: false } & SendFailure)> {
  const { attachment } = options;
  const whatsapp = options.channelType === 'whatsapp';
  const form = multipart(
    whatsapp
      ? { messaging_product: 'whatsapp', type: attachment.mimeType }
      : { platform: 'instagram', message: JSON.stringify({ attachment: { type: INSTAGRAM_TYPES[attachment.type], payload: { is_reusable: true } } }) },
    {
      field: whatsapp ? 'file' : 'filedata',
      filename: attachment.filename ?? `${attachment.id}`,
      contentType: attachment.mimeType,
      size: attachment.size ?? 0,
      bytes: options.bytes,
    },
  );
  const path = whatsapp ? 'media' : 'message_attachments';
  const outcome = await httpRequest(`${options.baseUrl}/${encodeURIComponent(options.externalId)}/${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.accessToken}`, 'content-type': form.contentType, 'content-length': form.length },
    body: form.body,
    timeoutMs: options.timeoutMs,
    maxBodyBytes: MAX_ANSWER_BYTES,
    signal: options.signal,
  });
  if ('failure' in outcome) {
    return {
      ok: false,
      transient: true,
      code: outcome.failure === 'timeout' ? 'timeout' : 'network_error',
      message: `the media upload failed: ${outcome.message}`,
    };
  }
  let body: unknown;
  try {
    body = JSON.parse(outcome.body.toString('utf8'));
  } catch {
    body = undefined;
  }
  if (outcome.status < 200 || outcome.status >= 300) return { ok: false, ...classifyGraphFailure(outcome.status, body) };
  const answer = body as { id?: unknown; attachment_id?: unknown } | undefined;
  const id = whatsapp ? answer?.id : answer?.attachment_id;
  if (typeof id !== 'string' && typeof id !== 'number') return { ok: false, transient: true, code: 'http_200', message: 'the media upload answered no id' };
  return { ok: true, id: String(id) };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: an uploaded file (`type` image, video, audio, document or sticker). */
export function whatsappMediaBody(recipient: string, attachment: Attachment, mediaId: string): Record<string, unknown> {
  const captioned = attachment.type === 'image' || attachment.type === 'video' || attachment.type === 'document';
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    ...whatsappAddress(recipient),
    type: attachment.type,
    [attachment.type]: {
      id: mediaId,
      ...(captioned && attachment.caption && { caption: attachment.caption }),
      ...(attachment.type === 'document' && attachment.filename && { filename: attachment.filename }),
    },
  };
}

/** Instagram Messaging API `POST /{ig-id}/messages`: an uploaded attachment. */
export function instagramAttachmentBody(instagramId: string, attachment: Attachment, attachmentId: string): Record<string, unknown> {
  return { recipient: { id: instagramId }, message: { attachment: { type: INSTAGRAM_TYPES[attachment.type], payload: { attachment_id: attachmentId } } } };
}

type InteractiveOffer = Extract<Interactive, { type: 'buttons' | 'list' }>;

/**
 * WhatsApp Cloud API `POST /{phone-number-id}/messages`: reply buttons (`interactive.type: button`,
 * `action.buttons[]` of `{type: reply, reply: {id, title}}`) or a list (`interactive.type: list`,
 * `action.button` and `action.sections[]` of `{title?, rows: [{id, title, description?}]}`), with
 * the optional text header and footer.
 */
export function whatsappInteractiveBody(recipient: string, interactive: InteractiveOffer): Record<string, unknown> {
  const action =
    interactive.type === 'buttons'
      ? { buttons: interactive.buttons.map(({ id, title }) => ({ type: 'reply', reply: { id, title } })) }
      : {
          button: interactive.button,
          sections: interactive.sections.map((section) => ({
            ...(section.title !== undefined && { title: section.title }),
            rows: section.rows.map(({ id, title, description }) => ({ id, title, ...(description !== undefined && { description }) })),
          })),
        };
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    ...whatsappAddress(recipient),
    type: 'interactive',
    interactive: {
      type: interactive.type === 'buttons' ? 'button' : 'list',
      ...(interactive.header !== undefined && { header: { type: 'text', text: interactive.header } }),
      body: { text: interactive.body },
      ...(interactive.footer !== undefined && { footer: { text: interactive.footer } }),
      action,
    },
  };
}

/**
 * A message body answering (quoting) the message with provider id `quoted`: WhatsApp's
 * `context: {message_id}`, Instagram's `reply_to: {mid}` beside `recipient` and `message`.
 */
export function replyingTo(body: Record<string, unknown>, channelType: ChannelType, quoted: string): Record<string, unknown> {
  return channelType === 'whatsapp' ? { ...body, context: { message_id: quoted } } : { ...body, reply_to: { mid: quoted } };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: a reaction on a message (`emoji` "" removes ours). */
export function whatsappReactionBody(recipient: string, messageId: string, emoji: string): Record<string, unknown> {
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    ...whatsappAddress(recipient),
    type: 'reaction',
    reaction: { message_id: messageId, emoji },
  };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: a received message marked read, with the typing indicator when `typing`. */
export function whatsappReadBody(messageId: string, typing: boolean): Record<string, unknown> {
  return { messaging_product: 'whatsapp', status: 'read', message_id: messageId, ...(typing && { typing_indicator: { type: 'text' } }) };
}

/** Instagram Messaging API `POST /{ig-id}/messages`: a sender action (`mark_seen`, `typing_on`), alone in its request. */
export function instagramSenderActionBody(instagramId: string, action: 'mark_seen' | 'typing_on'): Record<string, unknown> {
  return { recipient: { id: instagramId }, sender_action: action };
}
