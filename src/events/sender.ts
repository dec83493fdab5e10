// One webhook attempt: the event's JSON POSTed with the Standard Webhooks headers, through the
// outbound client to the address the SSRF guard checked (pinned), within a time limit, redirects
// not followed.
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { postJson } from '../outbound/http.js';
import type { CheckedTarget } from '../outbound/ssrf.js';

/** How long an endpoint has to answer. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** What is read of an answer's body (and thrown away): enough to finish a keep-alive exchange. */
const MAX_ANSWER_BYTES = 64 * 1024;

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** An endpoint secret's HMAC key: the bytes its base64 (after `whsec_`) holds, decoded once per secret by the caller (the dispatcher keeps it with the opened secret). */
export function webhookKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
}

/** The Standard Webhooks signature of one attempt: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under the endpoint's key (webhookKey). */
export function signWebhook(key: KeyObject, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export type AttemptResult =
  | { ok: true; status: number }
  /** `status` when the endpoint answered (not 2xx), else null (no answer: network error, timeout). */
  | { ok: false; status: number | null; error: string };

const USER_AGENT = 'SupportFunnel-Webhooks/1.0';

/** POSTs `body` to the checked target, signed; a 2xx within `timeoutMs` is a success, anything else is not. */
export async function sendWebhook(options: {
  target: CheckedTarget;
  /** The endpoint's HMAC key (webhookKey of its secret). */
  key: KeyObject;
  eventId: string;
  body: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}): Promise<AttemptResult> {
  const { target, eventId, body, signal } = options;
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const timestamp = Math.floor(Date.now() / 1000);
  let outcome;
  try {
    outcome = await postJson(target.url, {
      pinTo: target,
      headers: {
        'user-agent': USER_AGENT,
        'webhook-id': eventId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(options.key, eventId, timestamp, body),
      },
      body,
      timeoutMs,
      maxBodyBytes: MAX_ANSWER_BYTES,
      read: 'status',
      signal,
    });
  } catch (err) {
    if (signal?.aborted) return { ok: false, status: null, error: 'the attempt was stopped (the service is shutting down)' };
    throw err;
  }
  if ('failure' in outcome) {
    if (outcome.failure === 'timeout') return { ok: false, status: null, error: `no answer within ${timeoutMs / 1000} s` };
    return { ok: false, status: null, error: `could not reach the endpoint (${outcome.code ?? outcome.message})` };
  }
  const { status } = outcome;
  if (status >= 200 && status < 300) return { ok: true, status };
  if (status >= 300 && status < 400) return { ok: false, status, error: `the endpoint answered HTTP ${status} (a redirect; redirects are not followed)` };
  return { ok: false, status, error: `the endpoint answered HTTP ${status}` };
}
