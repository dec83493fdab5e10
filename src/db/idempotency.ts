// The stored results of POSTs sent with an Idempotency-Key (kept 24 hours).
import { CompiledQuery, sql, type Transaction } from 'kysely';
import type { Db } from './database.js';
import { readWithNext, runAtCommit, type ReadWithNext } from './pg-driver.js';
import type { Database } from './schema.js';

export const IDEMPOTENCY_TTL_HOURS = 24;

export interface IdempotencyScope {
  workspaceId: string;
  apiKeyId: string;
  key: string;
}

export interface StoredResult {
  method: string;
  path: string;
  bodySha256: string;
  status: number;
  /** The body's JSON text ('' for none), or, when `responseSealed`, that text sealed under SECRETS_KEY. */
  response: string;
  responseSealed: boolean;
}

/** What the key's lookup says: whether this transaction holds the key, and the result stored under it. */
export interface KeyAnswer {
  locked: boolean;
  stored: StoredResult | undefined;
}

/** The key's lookup started by lockAndFindResult. */
export interface KeyLookup {
  /** Its answer when it is already there: it ran at once. */
  known: KeyAnswer | undefined;
  /** Its answer; when nothing has sent it yet (readWithNext), it is sent now. */
  answer(): Promise<KeyAnswer>;
}

/**
 * The text of the lookup's failure when another transaction holds the key. PostgreSQL has no way to
 * fail a plain statement on purpose, so the statement casts this text to boolean, which fails (22P02
 * naming it). Failing instead of answering `locked` false matters when the lookup travels with the
 * handler's first statement: the failure aborts the transaction, so that statement does not run at
 * all, instead of running beside the request that holds the key (waiting on its locks, deadlocking
 * with it) only to be rolled back.
 */
const HELD_ELSEWHERE = 'idempotency key held by another transaction';

type LookupRow = { locked: boolean } & { [K in keyof StoredResult]: StoredResult[K] | null };

/** The lookup's fixed text (compiled once, prepared once per connection). $1 the lock's key, $2 workspace, $3 API key, $4 the key. */
const LOOKUP = `
    select cast(case when pg_try_advisory_xact_lock(hashtextextended($1, 7)) then 'true' else '${HELD_ELSEWHERE}' end as boolean) as locked,
           k.method, k.path, k.body_sha256 as "bodySha256", k.status, k.response, k.response_sealed as "responseSealed"
      from (select 1) as one
      left join idempotency_keys k
        on k.workspace_id = $2 and k.api_key_id = $3 and k.key = $4
       and k.created_at > now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`;

const lookupStatement = (scope: IdempotencyScope): CompiledQuery =>
  CompiledQuery.raw(LOOKUP, [`${scope.workspaceId}/${scope.apiKeyId}/${scope.key}`, scope.workspaceId, scope.apiKeyId, scope.key]);

const isHeldElsewhere = (err: unknown): boolean => {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === '22P02' && String(message).includes(HELD_ELSEWHERE);
};

async function answerOf(rows: Promise<LookupRow[]>): Promise<KeyAnswer> {
  try {
    const { method, path, bodySha256, status, response, responseSealed } = (await rows)[0]!;
    const stored =
      method === null ? undefined : { method, path: path!, bodySha256: bodySha256!, status: status!, response: response!, responseSealed: responseSealed! };
    return { locked: true, stored };
  } catch (err) {
    if (isHeldElsewhere(err)) return { locked: false, stored: undefined };
    throw err;
  }
}

/**
 * Takes the key for this transaction and reads the result stored under it in the last 24 hours, in
 * one statement, the transaction's first (on PostgreSQL it travels with the BEGIN); `locked` false
 * when another transaction holds the key (a request with the same key still running), and the
 * transaction is then aborted. The lock is PostgreSQL's: it ends with the transaction, on every instance.
 * `withNext`: on PostgreSQL the lookup travels with the transaction's next statement (readWithNext),
 * which runs after it, in the same transaction, and is answered after it; nothing waits for its
 * answer until answer() is called. Without, or on the embedded database, it is answered (`known`)
 * before this returns.
 *
 * The read's snapshot is the statement's, taken before the lock: a request that finished between
 * the two is not seen here, and storeResult then finds its result in the way.
 */
export async function lockAndFindResult(trx: Transaction<Database>, scope: IdempotencyScope, { withNext = false } = {}): Promise<KeyLookup> {
  const compiled = lookupStatement(scope);
  const known = (answer: KeyAnswer): KeyLookup => ({ known: answer, answer: () => Promise.resolve(answer) });
  if (!withNext) return known(await answerOf(trx.executeQuery<LookupRow>(compiled).then((result) => result.rows)));
  let read: ReadWithNext<LookupRow>;
  try {
    read = await readWithNext<LookupRow>(trx, compiled);
  } catch (err) {
    // It ran at once, and failed.
    return known(await answerOf(Promise.reject(err)));
  }
  if (read.ranAtOnce) return known(await answerOf(read.rows()));
  return { known: undefined, answer: () => answerOf(read.rows()) };
}

/**
 * Stores the result under the key, replacing an expired one, as the transaction's last statement
 * (runAtCommit: on PostgreSQL it travels with the COMMIT). A result of the last 24 hours already
 * there (a request with the same key finished after lockAndFindResult's snapshot) fails it, and the
 * commit, with a unique violation: isResultInTheWay says so; roll back and look again.
 */
export async function storeResult(trx: Transaction<Database>, scope: IdempotencyScope, result: StoredResult): Promise<void> {
  const parameters = [
    scope.workspaceId,
    scope.apiKeyId,
    scope.key,
    result.method,
    result.path,
    result.bodySha256,
    result.status,
    result.response,
    result.responseSealed,
  ];
  await runAtCommit(trx, CompiledQuery.raw(STORE, parameters));
}

/**
 * The store's fixed text. $1 workspace, $2 API key, $3 the key, $4 method, $5 path, $6 the body's
 * SHA-256, $7 status, $8 response, $9 sealed.
 */
const STORE = `
    with expired as (
      delete from idempotency_keys
       where workspace_id = $1 and api_key_id = $2 and key = $3 and created_at <= now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'
      returning 1
    )
    insert into idempotency_keys (workspace_id, api_key_id, key, method, path, body_sha256, status, response, response_sealed)
    select $1::uuid, $2::uuid, $3, $4, $5, $6, $7::smallint, $8, $9::boolean
      from (select count(*) from expired) as cleared`;

/** The error of a store that found a fresh result under its key (see storeResult). */
export function isResultInTheWay(err: unknown): boolean {
  const { code, constraint, message } = (err ?? {}) as { code?: unknown; constraint?: unknown; message?: unknown };
  return code === '23505' && (constraint === 'idempotency_keys_pkey' || String(message).includes('idempotency_keys_pkey'));
}

/** Deletes results past their 24 hours; how many. */
export async function purgeExpiredResults(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<=', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** A stored result whose response is sealed, as listStaleSealedResults finds it. */
export interface SealedResult extends IdempotencyScope {
  response: string;
}

/**
 * The results of the last 24 hours whose response is sealed under another key than `keyId` (the
 * partial index idempotency_keys_sealed lists the sealed ones alone). Older ones are never replayed
 * and are purged within the hour: they are left alone.
 */
export function listStaleSealedResults(db: Db, keyId: string): Promise<SealedResult[]> {
  return db
    .selectFrom('idempotency_keys')
    .select(['workspace_id as workspaceId', 'api_key_id as apiKeyId', 'key', 'response'])
    .where('response_sealed', '=', true)
    .where('created_at', '>', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`)
    .where('response', 'not like', `v1.${keyId}.%`)
    .execute();
}

/** Replaces a sealed response by `after` unless it changed meanwhile (expired and stored again); whether it did. */
export async function resealResult(db: Db, result: SealedResult, after: string): Promise<boolean> {
  const updated = await db
    .updateTable('idempotency_keys')
    .set({ response: after })
    .where('workspace_id', '=', result.workspaceId)
    .where('api_key_id', '=', result.apiKeyId)
    .where('key', '=', result.key)
    .where('response_sealed', '=', true)
    .where('response', '=', result.response)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
}
