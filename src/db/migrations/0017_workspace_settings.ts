// Workspace settings (time zone, business hours, NPS texts) in a table of their own rather than
// columns on workspaces: a workspace that never changed them has no row and reads the defaults, so
// nothing is backfilled or rewritten, provisioning writes nothing new, and the table has one owner
// (src/db/settings.ts). A null column is a key never set (its default). The service checks values
// before writing; the checks here only keep the shapes. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table workspace_settings (
    workspace_id uuid primary key references workspaces (id) on delete cascade,
    timezone text check (char_length(timezone) between 1 and 64),
    business_hours jsonb check (jsonb_typeof(business_hours) = 'object'),
    nps jsonb check (jsonb_typeof(nps) = 'object'),
    updated_at timestamptz not null default now()
  )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists workspace_settings`.execute(db);
}
