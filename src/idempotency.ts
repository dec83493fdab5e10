// Idempotency-Key on POSTs: the request runs inside one transaction that takes the key, runs the
// handler and stores its result, so the change and its stored result commit together or not at
// all; a retry within 24 hours replays the result instead of changing anything again. A result
// whose answer holds a secret is stored sealed under SECRETS_KEY, as the secret itself is.
import { createHash } from 'node:crypto';
import { SecretsError, type SecretBox } from './secrets.js';
import { transact, type Db } from './db/database.js';
import {
  isResultInTheWay,
  listStaleSealedResults,
  lockAndFindResult,
  purgeExpiredResults,
  resealResult,
  storeResult,
  type IdempotencyScope,
  type KeyAnswer,
  type StoredResult,
} from './db/idempotency.js';
import { JsonText } from './db/pagination.js';
import { ApiError } from './errors.js';
import { MAX_JSON_DEPTH, tooDeep } from './json-scan.js';
import type { ScheduledTask } from './jobs/recurring.js';

export interface IdempotentRequest {
  method: string;
  path: string;
  body: unknown;
}

interface Reply {
  status: number;
  body?: unknown;
  /** The body holds a secret shown this once: stored for replays only sealed (see Reply in routes/handler.ts). */
  holdsSecret?: boolean;
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

/** The response text to store: sealed under `box` when the reply holds a secret. */
function responseToStore(reply: Reply, box: SecretBox | undefined): Pick<StoredResult, 'response' | 'responseSealed'> {
  const text = reply.body === undefined ? '' : reply.body instanceof JsonText ? reply.body.text : JSON.stringify(reply.body);
  if (!reply.holdsSecret) return { response: text, responseSealed: false };
  // Unreachable while every operation answering a secret needs the box itself to make it.
  if (!box) throw new ApiError(503, 'service_unavailable', 'This answer holds a secret, and the operator has not configured SECRETS_KEY to keep it.');
  return { response: box.seal(text), responseSealed: true };
}

/**
 * The stored response's text, opened when sealed. One that does not open here (sealed under a key
 * this instance lacks, say another instance's newer SECRETS_KEY during a rotation) is a 503 naming
 * no secret: the integrator may retry, and an instance with the key answers it.
 */
function storedResponseText(stored: StoredResult, box: SecretBox | undefined): string {
  if (!stored.responseSealed) return stored.response;
  try {
    if (!box) throw new SecretsError('SECRETS_KEY is not set');
    return box.open(stored.response);
  } catch (err) {
    if (!(err instanceof SecretsError)) throw err;
    const keyId = stored.response.split('.')[1] ?? '';
    throw new ApiError(
      503,
      'service_unavailable',
      `The stored result of this Idempotency-Key holds a secret sealed under key ${keyId}, which this instance cannot open; retry later.`,
      undefined,
      { 'Retry-After': '5' },
    );
  }
}

/** A stored reply found after the handler ran: thrown to roll its changes back, answered outside. */
class Replay extends Error {
  constructor(readonly reply: { status: number; body?: JsonText<unknown> }) {
    super('the key holds a stored reply');
  }
}

/**
 * What the key says before anything is stored: undefined when this request is the key's first (the
 * handler's reply is stored), else the stored reply to replay; throws the 409 or 422.
 */
function replyOfKey({ locked, stored }: KeyAnswer, request: IdempotentRequest, bodySha256: string, box: SecretBox | undefined): Replay | undefined {
  if (!locked) {
    throw new ApiError(409, 'idempotency_key_in_progress', 'A request with this Idempotency-Key is still running; retry shortly.');
  }
  if (!stored) return undefined;
  if (stored.method !== request.method || stored.path !== request.path || stored.bodySha256 !== bodySha256) {
    const otherBody = stored.bodySha256 !== bodySha256 ? ' with another body' : '';
    throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with another path or body within 24 hours.', [
      { path: '/headers/idempotency-key', message: `was first used for ${stored.method} ${stored.path}${otherBody}` },
    ]);
  }
  const text = storedResponseText(stored, box);
  const body = text === '' ? undefined : new JsonText(text);
  return new Replay({ status: stored.status, ...(body && { body }) });
}

/**
 * Runs `handle` once per key: the first request's reply is stored with its change (sealed under
 * `box` when the reply holds a secret); the same request again answers that reply (`replayed`);
 * another path or body under the key is a 422, and a request while the first still runs a 409. A
 * handler that throws stores nothing.
 *
 * `withFirstStatement`: the key's lookup travels with the handler's first statement instead of
 * costing a round trip of its own (lockAndFindResult's `withNext`), and is read once the handler is
 * done. The handler then runs before the key is confirmed, so it may be asked only of an operation
 * that does nothing outside the database until it returns: when the key turns out to be another
 * request's, the transaction is rolled back and the handler's changes with it, and what the key
 * says is the answer, the handler's reply or error never is.
 */
export async function runIdempotent<R extends Reply>(
  db: Db,
  scope: IdempotencyScope,
  request: IdempotentRequest,
  handle: (db: Db) => Promise<R>,
  box: SecretBox | undefined,
  { withFirstStatement = false } = {},
): Promise<{ reply: R | { status: number; body?: JsonText<unknown> }; replayed: boolean }> {
  const bodySha256 = sha256(canonicalJson(request.body));
  const attempt = () =>
    transact(db, async (trx) => {
      const lookup = await lockAndFindResult(trx, scope, { withNext: withFirstStatement });
      if (lookup.known) {
        const replay = replyOfKey(lookup.known, request, bodySha256, box);
        if (replay) return { reply: replay.reply, replayed: true };
      }
      let reply: R;
      try {
        reply = await handle(trx);
      } catch (err) {
        // A handler's statement failing on what the key's first request did (its contact made, say)
        // is not this request's answer: the key's is.
        const replay = replyOfKey(await lookup.answer(), request, bodySha256, box);
        if (replay) throw replay;
        throw err;
      }
      const replay = replyOfKey(await lookup.answer(), request, bodySha256, box);
      if (replay) throw replay;
      await storeResult(trx, scope, { method: request.method, path: request.path, bodySha256, status: reply.status, ...responseToStore(reply, box) });
      return { reply, replayed: false };
    });
  const run = () =>
    attempt().catch((err: unknown) => {
      if (err instanceof Replay) return { reply: err.reply, replayed: true };
      throw err;
    });
  try {
    return await run();
  } catch (err) {
    // The first request finished between our look and our lock: our change is rolled back, and
    // the second look finds its result.
    if (isResultInTheWay(err)) return run();
    throw err;
  }
}

/**
 * Re-seals under the current SECRETS_KEY every stored result of the last 24 hours that another key
 * (SECRETS_KEY_PREVIOUS) sealed (npm run secrets:rotate, with the channels' and endpoints' secrets);
 * one stored again meanwhile is left for the next run.
 */
export async function rotateSealedResults(db: Db, box: SecretBox): Promise<{ resealed: number; remaining: number }> {
  let resealed = 0;
  for (const result of await listStaleSealedResults(db, box.keyId)) {
    if (await resealResult(db, result, box.seal(box.open(result.response)))) resealed++;
  }
  return { resealed, remaining: (await listStaleSealedResults(db, box.keyId)).length };
}

/**
 * Deletes stored results past their 24 hours: the task of the 'purge-idempotency-keys' schedule
 * (jobs/kinds.ts), run hourly by one instance of the cluster.
 */
export const purgeExpiredKeys: ScheduledTask = async (trx, logger) => {
  const deleted = await purgeExpiredResults(trx);
  if (deleted > 0) logger.info({ deleted }, 'expired idempotency keys purged');
};
