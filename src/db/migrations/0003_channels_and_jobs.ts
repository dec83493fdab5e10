// Channels that carry messages (sandbox or Meta, with encrypted secrets), what inbound traffic and
// delivery need on contacts, threads and messages, and the durable job queue. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table channels add column provider text not null default 'sandbox' check (provider in ('sandbox', 'meta'))`,
  sql`alter table channels add column external_id text`,
  /** AES-256-GCM sealed JSON of the Meta secrets; null on sandbox channels. */
  sql`alter table channels add column secrets text`,
  sql`alter table channels add column updated_at timestamptz`,
  sql`update channels set updated_at = created_at`,
  sql`alter table channels alter column updated_at set not null`,
  sql`alter table channels alter column updated_at set default now()`,
  sql`alter table channels add constraint channels_meta_complete check (provider = 'sandbox' or (external_id is not null and secrets is not null))`,
  // Meta's webhooks name the channel by id alone (/webhooks/meta/{id}).
  sql`create unique index channels_id_key on channels (id)`,

  sql`alter table contacts add column instagram_id text`,
  sql`create unique index contacts_instagram_id_key on contacts (workspace_id, instagram_id)`,

  sql`alter table threads add column last_inbound_at timestamptz`,

  sql`alter table messages add column external_id text`,
  sql`alter table messages add column error jsonb`,
  sql`alter table messages add column template jsonb`,
  sql`alter table messages drop constraint messages_status_check`,
  sql`alter table messages add constraint messages_status_check check (status in ('queued', 'sent', 'delivered', 'read', 'failed'))`,
  // One message per provider id on a channel: a webhook delivered twice stores one message, and
  // a status finds its message.
  sql`create unique index messages_external_id_key on messages (workspace_id, channel_id, external_id) where external_id is not null`,

  // Unfinished background work; a job's row is deleted when it finishes, either way.
  sql`create table jobs (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    queue text not null,
    ordering_key text,
    payload jsonb not null,
    run_at timestamptz not null,
    attempts int not null default 0,
    locked_by text,
    locked_until timestamptz,
    last_error text,
    created_at timestamptz not null,
    primary key (workspace_id, id)
  )`,
  // The claim's order: due jobs are read in it, so a claim stops at its limit instead of sorting the backlog.
  sql`create index jobs_due_idx on jobs (queue, run_at, created_at, id)`,
  sql`create index jobs_ordering_idx on jobs (queue, ordering_key, created_at, id) where ordering_key is not null`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const undo = [
    sql`drop table if exists jobs`,
    sql`drop index if exists messages_external_id_key`,
    sql`alter table messages drop constraint messages_status_check`,
    sql`update messages set status = 'delivered' where status = 'read'`,
    sql`alter table messages add constraint messages_status_check check (status in ('queued', 'sent', 'delivered', 'failed'))`,
    sql`alter table messages drop column template`,
    sql`alter table messages drop column error`,
    sql`alter table messages drop column external_id`,
    sql`alter table threads drop column last_inbound_at`,
    sql`drop index if exists contacts_instagram_id_key`,
    sql`alter table contacts drop column instagram_id`,
    sql`drop index if exists channels_id_key`,
    sql`alter table channels drop constraint channels_meta_complete`,
    sql`alter table channels drop column updated_at`,
    sql`alter table channels drop column secrets`,
    sql`alter table channels drop column external_id`,
    sql`alter table channels drop column provider`,
  ];
  for (const statement of undo) await statement.execute(db);
}
