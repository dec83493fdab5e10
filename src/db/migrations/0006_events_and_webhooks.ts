// The event log of every change the API exposes (kept 30 days), the integrator's webhook endpoints
// (secrets sealed as channel secrets are) and one delivery per event and subscribed endpoint.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table events (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    type text not null,
    -- The object as the API returns it (the event's data.object).
    data jsonb not null,
    -- The person the event is about (contact, their threads and messages): erasure finds them by it.
    contact_id uuid,
    created_at timestamptz not null,
    primary key (workspace_id, id)
  )`,
  // Newest first, with or without the type filter; and the 30-day purge.
  sql`create index events_list_idx on events (workspace_id, created_at desc, id desc)`,
  sql`create index events_type_idx on events (workspace_id, type, created_at desc, id desc)`,
  sql`create index events_created_at_idx on events (created_at)`,
  sql`create index events_contact_idx on events (workspace_id, contact_id) where contact_id is not null`,

  sql`create table webhook_endpoints (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    url text not null,
    -- Event types, or '*' for every type.
    events text[] not null,
    description text,
    -- The whsec_ secret, sealed by src/channels/secrets.ts.
    secret text not null,
    enabled boolean not null default true,
    disabled_reason text,
    -- Since when every attempt to it has failed (null after a success): 5 days of it disable it.
    failing_since timestamptz,
    created_at timestamptz not null,
    updated_at timestamptz not null,
    primary key (workspace_id, id)
  )`,

  sql`create table webhook_deliveries (
    workspace_id uuid not null,
    id uuid not null,
    endpoint_id uuid not null,
    event_id uuid not null,
    status text not null check (status in ('pending', 'succeeded', 'failed')),
    attempts int not null default 0,
    last_attempt_at timestamptz,
    last_response_status int,
    last_error text,
    next_attempt_at timestamptz,
    created_at timestamptz not null,
    primary key (workspace_id, id),
    foreign key (workspace_id, endpoint_id) references webhook_endpoints (workspace_id, id) on delete cascade,
    foreign key (workspace_id, event_id) references events (workspace_id, id) on delete cascade
  )`,
  // An endpoint's delivery log, newest first.
  sql`create index webhook_deliveries_endpoint_idx on webhook_deliveries (workspace_id, endpoint_id, created_at desc, id desc)`,
  // The cascade of an event's purge.
  sql`create index webhook_deliveries_event_idx on webhook_deliveries (workspace_id, event_id)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['webhook_deliveries', 'webhook_endpoints', 'events']) await sql`drop table if exists ${sql.table(table)}`.execute(db);
}
