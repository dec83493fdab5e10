// API keys and the workspaces they open.
import type { Db } from './database.js';
import type { Plan, Scope } from './schema.js';

export interface ActiveKey {
  keyId: string;
  workspaceId: string;
  plan: Plan;
  scopes: Scope[];
}

/** The unrevoked key with this hash, or undefined. */
export async function findActiveKey(db: Db, keyHash: string): Promise<ActiveKey | undefined> {
  return db
    .selectFrom('api_keys')
    .select(['id as keyId', 'workspace_id as workspaceId', 'plan', 'scopes'])
    .where('key_hash', '=', keyHash)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

export async function insertApiKey(db: Db, key: { workspaceId: string; id: string; hash: string; prefix: string; plan: Plan; scopes: Scope[] }): Promise<void> {
  await db
    .insertInto('api_keys')
    .values({
      workspace_id: key.workspaceId,
      id: key.id,
      key_hash: key.hash,
      prefix: key.prefix,
      plan: key.plan,
      scopes: key.scopes,
    })
    .execute();
}

/** Revokes a key; returns when it was revoked (first time or earlier), or undefined if unknown. */
export async function revokeApiKey(db: Db, keyId: string): Promise<{ workspaceId: string; revokedAt: Date } | undefined> {
  await db.updateTable('api_keys').set({ revoked_at: new Date() }).where('id', '=', keyId).where('revoked_at', 'is', null).execute();
  const row = await db.selectFrom('api_keys').select(['workspace_id', 'revoked_at']).where('id', '=', keyId).executeTakeFirst();
  return row?.revoked_at ? { workspaceId: row.workspace_id, revokedAt: row.revoked_at } : undefined;
}

/** Of these keys, the ones not revoked. */
export async function activeKeyIds(db: Db, keyIds: string[]): Promise<Set<string>> {
  if (keyIds.length === 0) return new Set();
  const rows = await db.selectFrom('api_keys').select('id').where('id', 'in', keyIds).where('revoked_at', 'is', null).execute();
  return new Set(rows.map((row) => row.id));
}
