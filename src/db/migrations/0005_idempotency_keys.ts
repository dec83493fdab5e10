// The stored results of POSTs sent with an Idempotency-Key, per API key, kept 24 hours. Each row is
// written in the transaction of the change it guards. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table idempotency_keys (
    workspace_id uuid not null,
    api_key_id uuid not null,
    key text not null,
    method text not null,
    path text not null,
    body_sha256 text not null,
    status smallint not null,
    response text not null,
    created_at timestamptz not null default now(),
    primary key (workspace_id, api_key_id, key),
    foreign key (workspace_id, api_key_id) references api_keys (workspace_id, id) on delete cascade
  )`,
  sql`create index idempotency_keys_created_at on idempotency_keys (created_at)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists idempotency_keys`.execute(db);
}
