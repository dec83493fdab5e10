// The v1 schema: every tenant table keyed by (workspace_id, id), composite foreign keys, and the
// indexes behind every list order, filter and the NPS aggregate. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table workspaces (
    id uuid primary key,
    name text not null,
    created_at timestamptz not null default now()
  )`,
  sql`create table api_keys (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    key_hash text not null,
    prefix text not null,
    plan text not null check (plan in ('free', 'pro', 'enterprise')),
    scopes text[] not null,
    created_at timestamptz not null default now(),
    revoked_at timestamptz,
    primary key (workspace_id, id)
  )`,
  sql`create unique index api_keys_key_hash_key on api_keys (key_hash)`,
  sql`create unique index api_keys_id_key on api_keys (id)`,
  sql`create table channels (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    type text not null check (type in ('whatsapp', 'instagram')),
    name text not null,
    created_at timestamptz not null default now(),
    primary key (workspace_id, id)
  )`,
  sql`create index channels_list_idx on channels (workspace_id, created_at, id)`,
  sql`create table agents (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    name text not null,
    status text not null check (status in ('active', 'inactive')),
    instructions text not null,
    model text not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (workspace_id, id)
  )`,
  sql`create index agents_list_idx on agents (workspace_id, created_at, id)`,
  sql`create index agents_status_list_idx on agents (workspace_id, status, created_at, id)`,
  sql`create table contacts (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    name text not null,
    phone text,
    email text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (workspace_id, id)
  )`,
  sql`create unique index contacts_phone_key on contacts (workspace_id, phone)`,
  sql`create index contacts_list_idx on contacts (workspace_id, created_at, id)`,
  sql`create index contacts_email_idx on contacts (workspace_id, lower(email), created_at, id)`,
  sql`create table threads (
    workspace_id uuid not null,
    id uuid not null,
    contact_id uuid not null,
    channel_id uuid not null,
    agent_id uuid,
    status text not null check (status in ('open', 'closed')),
    nps_score smallint check (nps_score between 0 and 10),
    nps_created_at timestamptz,
    last_message_at timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (workspace_id, id),
    foreign key (workspace_id, contact_id) references contacts (workspace_id, id) on delete cascade,
    foreign key (workspace_id, channel_id) references channels (workspace_id, id) on delete cascade,
    foreign key (workspace_id, agent_id) references agents (workspace_id, id) on delete set null (agent_id),
    check ((nps_score is null) = (nps_created_at is null))
  )`,
  sql`create unique index threads_one_open_per_pair_key on threads (workspace_id, contact_id, channel_id) where status = 'open'`,
  sql`create index threads_list_idx on threads (workspace_id, created_at desc, id desc)`,
  sql`create index threads_status_list_idx on threads (workspace_id, status, created_at desc, id desc)`,
  sql`create index threads_contact_list_idx on threads (workspace_id, contact_id, created_at desc, id desc)`,
  sql`create index threads_channel_list_idx on threads (workspace_id, channel_id, created_at desc, id desc)`,
  sql`create index threads_agent_list_idx on threads (workspace_id, agent_id, created_at desc, id desc)`,
  sql`create index threads_nps_idx on threads (workspace_id, nps_created_at) include (nps_score) where nps_created_at is not null`,
  sql`create table messages (
    workspace_id uuid not null,
    id uuid not null,
    thread_id uuid not null,
    contact_id uuid not null,
    channel_id uuid not null,
    direction text not null check (direction in ('outbound', 'inbound')),
    content text not null,
    status text not null check (status in ('queued', 'sent', 'delivered', 'failed')),
    created_at timestamptz not null default now(),
    primary key (workspace_id, id),
    foreign key (workspace_id, thread_id) references threads (workspace_id, id) on delete cascade,
    foreign key (workspace_id, contact_id) references contacts (workspace_id, id) on delete cascade,
    foreign key (workspace_id, channel_id) references channels (workspace_id, id) on delete cascade
  )`,
  sql`create index messages_thread_list_idx on messages (workspace_id, thread_id, created_at, id)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['messages', 'threads', 'contacts', 'agents', 'channels', 'api_keys', 'workspaces']) {
    await sql`drop table if exists ${sql.table(table)}`.execute(db);
  }
}
