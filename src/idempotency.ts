// Idempotency-Key on POSTs: the request runs inside one transaction that takes the key, runs the
// handler and stores its result, so the change and its stored result commit together or not at
// all; a retry within 24 hours replays the result instead of changing anything again.
import { createHash } from 'node:crypto';
import { transact, type Db } from './db/database.js';
import { isResultInTheWay, lockAndFindResult, purgeExpiredResults, storeResult, type IdempotencyScope } from './db/idempotency.js';
import { JsonText } from './db/pagination.js';
import { ApiError } from './errors.js';
import { MAX_JSON_DEPTH, tooDeep } from './json-scan.js';
import type { Logger } from './logger.js';
import type { BackgroundWork } from './shutdown.js';

export interface IdempotentRequest {
  method: string;
  path: string;
  body: unknown;
}

interface Reply {
  status: number;
  body?: unknown;
}

/**
 * JSON with object keys sorted, so the same body in another key order is the same body. Recursive,
 * so bounded: a body reaching it passed the body check's MAX_JSON_DEPTH, and a deeper value is
 * refused here too rather than run out of stack.
 */
function canonicalJson(value: unknown, depth = 0): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
  if (depth >= MAX_JSON_DEPTH) throw tooDeep();
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item, depth + 1)).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key], depth + 1)}`);
  return `{${entries.join(',')}}`;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Runs `handle` once per key: the first request's reply is stored with its change; the same
 * request again answers that reply (`replayed`); another path or body under the key is a 422, and
 * a request while the first still runs a 409. A handler that throws stores nothing.
 */
export async function runIdempotent<R extends Reply>(
  db: Db,
  scope: IdempotencyScope,
  request: IdempotentRequest,
  handle: (db: Db) => Promise<R>,
): Promise<{ reply: R | { status: number; body?: JsonText<unknown> }; replayed: boolean }> {
  const bodySha256 = sha256(canonicalJson(request.body));
  const attempt = () =>
    transact(db, async (trx) => {
      const { locked, stored } = await lockAndFindResult(trx, scope);
      if (!locked) {
        throw new ApiError(409, 'idempotency_key_in_progress', 'A request with this Idempotency-Key is still running; retry shortly.');
      }
      if (stored) {
        if (stored.method !== request.method || stored.path !== request.path || stored.bodySha256 !== bodySha256) {
          const otherBody = stored.bodySha256 !== bodySha256 ? ' with another body' : '';
          throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with another path or body within 24 hours.', [
            { path: '/headers/idempotency-key', message: `was first used for ${stored.method} ${stored.path}${otherBody}` },
          ]);
        }
        const body = stored.response === '' ? undefined : new JsonText(stored.response);
        return { reply: { status: stored.status, ...(body && { body }) }, replayed: true };
      }
      const reply = await handle(trx);
      const response = reply.body === undefined ? '' : reply.body instanceof JsonText ? reply.body.text : JSON.stringify(reply.body);
      await storeResult(trx, scope, { method: request.method, path: request.path, bodySha256, status: reply.status, response });
      return { reply, replayed: false };
    });
  try {
    return await attempt();
  } catch (err) {
    // The first request finished between our look and our lock: our change is rolled back, and
    // the second look finds its result.
    if (isResultInTheWay(err)) return attempt();
    throw err;
  }
}

/**
 * Deletes stored results past their 24 hours, at start and then every `everyMs`; registered with
 * the process's background work, so a stopping process waits for a purge under way.
 */
export function startExpiredResultPurge(db: Db, logger: Logger, background: BackgroundWork, everyMs = 3_600_000): void {
  const purge = () =>
    purgeExpiredResults(db).then(
      (deleted) => {
        if (deleted > 0) logger.info({ deleted }, 'expired idempotency keys purged');
      },
      (err: unknown) => logger.warn({ err }, 'purging expired idempotency keys failed; next try in an hour'),
    );
  let running = purge();
  const timer = setInterval(() => (running = purge()), everyMs);
  timer.unref();
  background.register('idempotency-purge', async () => {
    clearInterval(timer);
    await running;
  });
}
