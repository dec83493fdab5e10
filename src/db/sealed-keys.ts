// Which keys the sealed values at rest were sealed under, so a start with a SECRETS_KEY that opens
// none of them stops at once instead of failing every request that needs one.
import { sql } from 'kysely';
import { IDEMPOTENCY_TTL_HOURS } from './idempotency.js';
import type { Db } from './database.js';

/** Where sealed values are kept: channels' Meta secrets, webhook endpoints' secrets, stored answers holding one. */
export type SealedKind = 'channel' | 'webhookEndpoint' | 'idempotencyResult';

export interface SealedKeyUse {
  kind: SealedKind;
  /** The key id a sealed value carries (`v1.<key id>.<iv>.<tag>.<data>`). */
  keyId: string;
  count: number;
}

/**
 * How many sealed values of each kind each key sealed, in one query. Channels and endpoints are
 * few per workspace and read whole; stored results only those of the last 24 hours that are
 * sealed (older ones are never opened again), which the partial index idempotency_keys_sealed lists
 * alone.
 */
export async function sealedKeysInUse(db: Db): Promise<SealedKeyUse[]> {
  const { rows } = await sql<{ kind: SealedKind; keyId: string; count: number }>`
    select 'channel' as kind, split_part(secrets, '.', 2) as "keyId", count(*)::int as count
      from channels where secrets is not null group by 2
    union all
    select 'webhookEndpoint', split_part(secret, '.', 2), count(*)::int
      from webhook_endpoints group by 2
    union all
    select 'idempotencyResult', split_part(response, '.', 2), count(*)::int
      from idempotency_keys
     where response_sealed and created_at > now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})
     group by 2`.execute(db);
  return rows;
}
