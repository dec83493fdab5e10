// The stored results of POSTs sent with an Idempotency-Key (kept 24 hours).
import { sql, type Transaction } from 'kysely';
import type { Db } from './database.js';
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
  response: string;
}

/**
 * Takes the key for this transaction, or reports that another transaction holds it (a request with
 * the same key still running). The lock is PostgreSQL's: it ends with the transaction, on every
 * instance.
 */
export async function lockIdempotencyKey(trx: Transaction<Database>, scope: IdempotencyScope): Promise<boolean> {
  const { rows } = await sql<{ locked: boolean }>`
    select pg_try_advisory_xact_lock(hashtextextended(${`${scope.workspaceId}/${scope.apiKeyId}/${scope.key}`}, 7)) as locked`.execute(trx);
  return rows[0]!.locked;
}

/** The result stored under the key in the last 24 hours, if any. */
export async function findStoredResult(db: Db, scope: IdempotencyScope): Promise<StoredResult | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .select(['method', 'path', 'body_sha256 as bodySha256', 'status', 'response'])
    .where('workspace_id', '=', scope.workspaceId)
    .where('api_key_id', '=', scope.apiKeyId)
    .where('key', '=', scope.key)
    .where('created_at', '>', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`)
    .executeTakeFirst();
}

/** Stores the result under the key, replacing an expired one. */
export async function storeResult(db: Db, scope: IdempotencyScope, result: StoredResult): Promise<void> {
  const values = {
    workspace_id: scope.workspaceId,
    api_key_id: scope.apiKeyId,
    key: scope.key,
    method: result.method,
    path: result.path,
    body_sha256: result.bodySha256,
    status: result.status,
    response: result.response,
  };
  await db
    .insertInto('idempotency_keys')
    .values(values)
    .onConflict((oc) => oc.columns(['workspace_id', 'api_key_id', 'key']).doUpdateSet({ ...values, created_at: sql`now()` }))
    .execute();
}

/** Deletes results past their 24 hours; how many. */
export async function purgeExpiredResults(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<=', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
