// Meta's Graph API, as the WhatsApp Cloud API and the Instagram Messaging API document it: the
// request bodies of a text or template message, the send itself, and what a failure means
// (passing, and worth retrying, or permanent).
import { postJson } from '../outbound/http.js';

/** The most of Graph's answer that is read; a longer one is a network failure. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** Graph error codes that pass: rate limits, temporary unavailability, "try again later". */
export const TRANSIENT_GRAPH_CODES: ReadonlySet<number> = new Set([1, 2, 4, 80007, 130429, 131000, 131016]);

export interface TemplateRef {
  name: string;
  language: string;
  parameters?: string[] | undefined;
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: free text. */
export function whatsappTextBody(phone: string, content: string): Record<string, unknown> {
  return { messaging_product: 'whatsapp', recipient_type: 'individual', to: phone.replace(/^\+/, ''), type: 'text', text: { body: content } };
}

/** WhatsApp Cloud API `POST /{phone-number-id}/messages`: an approved template with body parameters. */
export function whatsappTemplateBody(phone: string, template: TemplateRef): Record<string, unknown> {
  const parameters = template.parameters ?? [];
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to: phone.replace(/^\+/, ''),
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
