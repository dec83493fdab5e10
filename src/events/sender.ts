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

/** Endpoint secrets' HMAC keys, decoded once (a delivery is signed with the same few keys over and over). */
const KEYS_MAX = 1_000;
const keys = new Map<string, KeyObject>();

function hmacKey(secret: string): KeyObject {
  let key = keys.get(secret);
  if (key === undefined) {
    key = createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
    if (keys.size >= KEYS_MAX) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

/** The Standard Webhooks signature of one attempt: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', hmacKey(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export type AttemptResult =
  | { ok: true; status: number }
  /** `status` when the endpoint answered (not 2xx), else null (no answer: network error, timeout). */
  | { ok: false; status: number | null; error: string };

const USER_AGENT = 'SupportFunnel-Webhooks/1.0';

/** POSTs `body` to the checked target, signed; a 2xx within `timeoutMs` is a success, anything else is not. */
export async function sendWebhook(options: {
  target: CheckedTarget;
  secret: string;
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
        'webhook-signature': signWebhook(options.secret, eventId, timestamp, body),
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
