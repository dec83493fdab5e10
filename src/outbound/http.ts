// The one outbound HTTP client (Graph, the AI provider, webhook deliveries, next media downloads):
// node's http/https on kept-alive connections, a time limit, a cap on what is read of an answer,
// an AbortSignal, and, for URLs the SSRF guard checked, the connection pinned to the checked
// address. Node's http client rather than fetch (undici): its web streams and abort signals cost
// a large share of a delivery's CPU in the channels backlog bench.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';

export type HttpOutcome =
  /** The service answered (any status); `body` is empty when only the status was wanted. */
  | { status: number; body: Buffer }
  /**
   * No answer: `timeout` after `timeoutMs`; `network` for a connection that failed (`code`, e.g.
   * ECONNREFUSED, when node gave one) or an answer cut short or over `maxBodyBytes`.
   */
  | { failure: 'timeout' | 'network'; message: string; code?: string | undefined };

/** An address the SSRF guard checked: the request connects to it, whatever DNS says by then. */
export interface PinnedAddress {
  address: string;
  family: 4 | 6;
}

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  headers?: Record<string, string | number> | undefined;
  /** A stream (a file being uploaded) is piped; give its content-length in `headers`. */
  body?: string | Buffer | Readable | undefined;
  timeoutMs: number;
  /** The most of an answer that is read. */
  maxBodyBytes: number;
  /**
   * `body` (the default): the answer is kept, and one longer than `maxBodyBytes` or cut short is
   * a network failure. `status`: only the status counts; the body is read (up to the cap, enough
   * to finish a keep-alive exchange) and thrown away, and an answer cut short keeps its status.
   */
  read?: 'body' | 'status';
  /** Aborting it rejects the call with its reason, so a stopping worker can tell that from a failure. */
  signal?: AbortSignal | undefined;
  /** Connect to this checked address (see ./ssrf.ts) instead of resolving the URL's host. */
  pinTo?: PinnedAddress | undefined;
}

const agent = <T extends http.Agent>(Agent: new (options: http.AgentOptions) => T): T =>
  new Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 });

// Pinned requests keep their own connections: an agent reuses a kept-alive socket by host and
// port, and a pinned request must never ride a socket that was opened to an address nobody checked.
const agents = {
  plain: { 'http:': agent(http.Agent), 'https:': agent(https.Agent) },
  pinned: { 'http:': agent(http.Agent), 'https:': agent(https.Agent) },
};

const NO_BODY = Buffer.alloc(0);

function pinnedLookup(pin: PinnedAddress): LookupFunction {
  const { address, family } = pin;
  return (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all)
      (callback as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
}

/**
 * Sends one request and reads its answer. Resolves with the answer (any status) or why there was
 * none; rejects only when `signal` aborts (with its reason). Redirects are not followed.
 */
export function httpRequest(url: string | URL, options: HttpRequest): Promise<HttpOutcome> {
  const target = typeof url === 'string' ? new URL(url) : url;
  const secure = target.protocol === 'https:';
  const { signal, timeoutMs, maxBodyBytes } = options;
  const statusOnly = options.read === 'status';
  return new Promise<HttpOutcome>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let settled = false;
    const settle = (outcome: HttpOutcome | { aborted: unknown }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if ('aborted' in outcome) reject(outcome.aborted);
      else resolve(outcome);
    };
    const pool = options.pinTo ? agents.pinned : agents.plain;
    const request = (secure ? https : http).request(
      target,
      {
        method: options.method,
        agent: secure ? pool['https:'] : pool['http:'],
        ...(options.pinTo && { lookup: pinnedLookup(options.pinTo) }),
        ...(options.headers && { headers: options.headers }),
      },
      (response) => {
        const status = response.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let length = 0;
        response.on('data', (chunk: Buffer) => {
          length += chunk.length;
          if (length <= maxBodyBytes) {
            if (!statusOnly) chunks.push(chunk);
          } else if (statusOnly) {
            response.destroy();
          } else {
            settle({ failure: 'network', message: `the answer is longer than ${maxBodyBytes} bytes` });
            request.destroy();
          }
        });
        if (statusOnly) {
          const done = (): void => settle({ status, body: NO_BODY });
          response.on('end', done);
          response.on('close', done);
          response.on('error', done);
          return;
        }
        response.on('end', () => settle({ status, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }));
        response.on('error', (err) => settle({ failure: 'network', message: err.message }));
        response.on('close', () => {
          if (!response.complete) settle({ failure: 'network', message: 'the connection closed before the answer ended' });
        });
      },
    );
    const timer = setTimeout(() => {
      settle({ failure: 'timeout', message: `no answer within ${timeoutMs} ms` });
      request.destroy();
    }, timeoutMs);
    const onAbort = (): void => {
      settle({ aborted: signal!.reason });
      request.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err: NodeJS.ErrnoException) => settle({ failure: 'network', message: err.message, code: err.code }));
    const body = options.body;
    if (body instanceof Readable) {
      body.once('error', (err) => request.destroy(err));
      body.pipe(request);
    } else request.end(body);
  });
}

/** An answer read as text, or why there was none. */
export type TextOutcome = { status: number; text: string } | Extract<HttpOutcome, { failure: string }>;

/**
 * POSTs `body` (JSON text) with `content-type: application/json` and its length, then `headers`;
 * the answer as text (up to `maxBodyBytes`), or why there was none. Rejects only when `signal` aborts.
 */
export async function postJson(
  url: string | URL,
  options: Omit<HttpRequest, 'method' | 'headers' | 'body'> & { headers?: Record<string, string> | undefined; body: string },
): Promise<TextOutcome> {
  // Named one by one: spreading `options` here cost more CPU a request than the rest of postJson.
  const outcome = await httpRequest(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body), ...options.headers },
    body: options.body,
    timeoutMs: options.timeoutMs,
    maxBodyBytes: options.maxBodyBytes,
    read: options.read,
    signal: options.signal,
    pinTo: options.pinTo,
  });
  return 'failure' in outcome ? outcome : { status: outcome.status, text: outcome.body.toString('utf8') };
}

/** An answer whose body is read as a stream (a file), or why there was none. */
export type StreamOutcome = { status: number; headers: http.IncomingHttpHeaders; body: http.IncomingMessage } | Extract<HttpOutcome, { failure: string }>;

/**
 * GETs `url` and hands over the answer's body as a stream once its headers came (a media file:
 * never held in memory whole). `timeoutMs` bounds the wait for the headers and then each pause of
 * the body (the caller reads it); `signal` aborts it all. Redirects are not followed.
 */
export function httpGetStream(
  url: string | URL,
  options: { headers?: Record<string, string> | undefined; timeoutMs: number; signal?: AbortSignal | undefined; pinTo?: PinnedAddress | undefined },
): Promise<StreamOutcome> {
  const target = typeof url === 'string' ? new URL(url) : url;
  const secure = target.protocol === 'https:';
  const { signal, timeoutMs } = options;
  return new Promise<StreamOutcome>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let answered = false;
    const pool = options.pinTo ? agents.pinned : agents.plain;
    const request = (secure ? https : http).request(
      target,
      {
        method: 'GET',
        agent: secure ? pool['https:'] : pool['http:'],
        ...(options.pinTo && { lookup: pinnedLookup(options.pinTo) }),
        ...(options.headers && { headers: options.headers }),
      },
      (response) => {
        answered = true;
        clearTimeout(timer);
        // From here the reader waits on the body: an idle socket past the time limit ends it with an error.
        response.socket.setTimeout(timeoutMs, () => response.destroy(new Error(`the answer paused for more than ${timeoutMs} ms`)));
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: response });
      },
    );
    const timer = setTimeout(() => {
      if (answered) return;
      answered = true;
      resolve({ failure: 'timeout', message: `no answer within ${timeoutMs} ms` });
      request.destroy();
    }, timeoutMs);
    const onAbort = (): void => {
      request.destroy(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
      if (!answered) {
        answered = true;
        clearTimeout(timer);
        reject(signal!.reason);
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    request.on('close', () => signal?.removeEventListener('abort', onAbort));
    request.on('error', (err: NodeJS.ErrnoException) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      resolve({ failure: 'network', message: err.message, code: err.code });
    });
    request.end();
  });
}
