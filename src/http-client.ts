// JSON POSTs to the services the workers call (Meta's Graph API, an AI provider), on node's http
// client with kept-alive connections. fetch (undici) cost about a quarter of a delivery's CPU in the
// channels backlog bench: its web streams and abort signals, per request.
import http from 'node:http';
import https from 'node:https';

export type PostOutcome =
  /** The service answered (any status). */
  | { status: number; text: string }
  /** No answer: `timeout` after `timeoutMs`, else the network error's message. */
  | { failure: 'timeout' | 'network'; message: string };

/** The most of an answer that is read; a longer one is a network failure. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
};

/**
 * POSTs `body` (JSON text) to `url`; the answer, or why there was none. Rejects only when `signal`
 * aborts (with its reason), so a stopping worker can tell that from a failure.
 */
export function postJson(url: string, options: { headers?: Record<string, string>; body: string; timeoutMs: number; signal?: AbortSignal | undefined }): Promise<PostOutcome> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise<PostOutcome>((resolve, reject) => {
    if (options.signal?.aborted) return reject(options.signal.reason);
    let settled = false;
    const settle = (outcome: PostOutcome | { aborted: unknown }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if ('aborted' in outcome) reject(outcome.aborted);
      else resolve(outcome);
    };
    const request = client.request(
      target,
      {
        method: 'POST',
        agent: agents[target.protocol as 'http:' | 'https:'],
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body), ...options.headers },
      },
      (response) => {
        const chunks: Buffer[] = [];
        let length = 0;
        response.on('data', (chunk: Buffer) => {
          length += chunk.length;
          if (length > MAX_ANSWER_BYTES) {
            settle({ failure: 'network', message: `the answer is longer than ${MAX_ANSWER_BYTES} bytes` });
            request.destroy();
          } else chunks.push(chunk);
        });
        response.on('end', () => settle({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', (err) => settle({ failure: 'network', message: err.message }));
        response.on('close', () => {
          if (!response.complete) settle({ failure: 'network', message: 'the connection closed before the answer ended' });
        });
      },
    );
    const timer = setTimeout(() => {
      settle({ failure: 'timeout', message: `no answer within ${options.timeoutMs} ms` });
      request.destroy();
    }, options.timeoutMs);
    const onAbort = (): void => {
      settle({ aborted: options.signal!.reason });
      request.destroy();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err: NodeJS.ErrnoException) => settle({ failure: 'network', message: err.message }));
    request.end(options.body);
  });
}
