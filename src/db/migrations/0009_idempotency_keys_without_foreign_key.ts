// Stored Idempotency-Key results no longer reference their API key by a foreign key. Its check
// took a share lock on the API key's row in every keyed POST's transaction, and every request of a
// key contends for that same row (PostgreSQL then builds a multixact of all the lockers each time):
// about a tenth of what a key costs a request. Nothing is lost by it: a result lives 24 hours and is
// then purged, and API keys are revoked (revoked_at), never deleted, by the service. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table idempotency_keys drop constraint if exists idempotency_keys_workspace_id_api_key_id_fkey`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from idempotency_keys k where not exists (select 1 from api_keys a where a.workspace_id = k.workspace_id and a.id = k.api_key_id)`.execute(
    db,
  );
  await sql`
    alter table idempotency_keys add constraint idempotency_keys_workspace_id_api_key_id_fkey
      foreign key (workspace_id, api_key_id) references api_keys (workspace_id, id) on delete cascade`.execute(db);
}
