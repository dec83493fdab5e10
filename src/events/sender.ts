// One webhook attempt: the event's JSON POSTed with the Standard Webhooks headers, to the address
// the SSRF guard checked (pinned through `lookup`), within a time limit, redirects not followed.
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { CheckedTarget } from './ssrf.js';

/** How long an endpoint has to answer. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** What is read of an answer's body (and thrown away): enough to finish a keep-alive exchange. */
const MAX_ANSWER_BYTES = 64 * 1024;

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The Standard Webhooks signature of one attempt: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export type AttemptResult =
  | { ok: true; status: number }
  /** `status` when the endpoint answered (not 2xx), else null (no answer: network error, timeout). */
  | { ok: false; status: number | null; error: string };

const USER_AGENT = 'SupportFunnel-Webhooks/1.0';

// Connections are kept alive between attempts to the same host and port (their sockets lead to an
// address checked when they were opened); a per-endpoint cap keeps their number small.
const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
};

/** POSTs `body` to the checked target, signed; a 2xx within `timeoutMs` is a success, anything else is not. */
export async function sendWebhook(options: {
  target: CheckedTarget;
  secret: string;
  eventId: string;
  body: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}): Promise<AttemptResult> {
  const { target, eventId, body } = options;
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const timestamp = Math.floor(Date.now() / 1000);
  const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
    if ((lookupOptions as { all?: boolean }).all) (callback as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  };
  const client = target.url.protocol === 'https:' ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (result: AttemptResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const request = client.request(
      target.url,
      {
        method: 'POST',
        lookup: pinned,
        agent: agents[target.url.protocol as 'http:' | 'https:'],
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': USER_AGENT,
          'webhook-id': eventId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(options.secret, eventId, timestamp, body),
        },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) response.destroy();
        });
        const done = () => {
          if (status >= 200 && status < 300) finish({ ok: true, status });
          else if (status >= 300 && status < 400) finish({ ok: false, status, error: `the endpoint answered HTTP ${status} (a redirect; redirects are not followed)` });
          else finish({ ok: false, status, error: `the endpoint answered HTTP ${status}` });
        };
        response.on('end', done);
        response.on('close', done);
        response.on('error', done);
      },
    );
    const timer = setTimeout(() => {
      finish({ ok: false, status: null, error: `no answer within ${timeoutMs / 1000} s` });
      request.destroy();
    }, timeoutMs);
    const onAbort = () => {
      finish({ ok: false, status: null, error: 'the attempt was stopped (the service is shutting down)' });
      request.destroy();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err: NodeJS.ErrnoException) => finish({ ok: false, status: null, error: `could not reach the endpoint (${err.code ?? err.message})` }));
    request.end(body);
  });
}
