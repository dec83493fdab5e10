// Stream tokens: what a browser's EventSource, which sends no Authorization header, opens a stream
// with (`?token=`). A token stands for the key that made it for 60 seconds; only its hash is stored.
import type { Request } from 'express';
import { sql } from 'kysely';
import type { ActiveKey } from '../db/api-keys.js';
import type { Db } from '../db/database.js';
import { hashApiKey, randomBase62 } from '../keys.js';

export const STREAM_TOKEN_TTL_MS = 60_000;
export const STREAM_TOKEN_PATTERN = /^sst_[0-9A-Za-z]{43}$/;

/** A new token for the key; expired tokens are deleted on the way. */
export async function createStreamToken(db: Db, key: { workspaceId: string; keyId: string }, now = new Date()): Promise<{ token: string; expiresAt: Date }> {
  const token = `sst_${randomBase62(43)}`;
  const expiresAt = new Date(now.getTime() + STREAM_TOKEN_TTL_MS);
  await sql`
    with expired as (delete from stream_tokens where expires_at <= ${now}::timestamptz)
    insert into stream_tokens (token_hash, workspace_id, api_key_id, expires_at)
    values (${hashApiKey(token)}, ${key.workspaceId}::uuid, ${key.keyId}::uuid, ${expiresAt}::timestamptz)`.execute(db);
  return { token, expiresAt };
}

/** The unrevoked key an unexpired token stands for, or undefined. */
export async function findStreamTokenKey(db: Db, token: string, now = new Date()): Promise<ActiveKey | undefined> {
  if (!STREAM_TOKEN_PATTERN.test(token)) return undefined;
  return db
    .selectFrom('stream_tokens as t')
    .innerJoin('api_keys as k', 'k.id', 't.api_key_id')
    .select(['k.id as keyId', 'k.workspace_id as workspaceId', 'k.plan', 'k.scopes'])
    .where('t.token_hash', '=', hashApiKey(token))
    .where('t.expires_at', '>', now)
    .where('k.revoked_at', 'is', null)
    .executeTakeFirst();
}

/** The key behind `?token=` on the one operation that takes it (GET /events/stream). */
export function streamTokenCredential(db: Db): (req: Request) => Promise<ActiveKey | undefined> {
  return async (req) => {
    const token = req.operation?.operationId === 'streamEvents' ? req.query.token : undefined;
    return typeof token === 'string' ? findStreamTokenKey(db, token) : undefined;
  };
}
