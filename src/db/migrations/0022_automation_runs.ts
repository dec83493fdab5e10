// Automations' runs (issue 22): one row per automation whose conditions matched an event or a
// silence (or that the loop guard skipped), with what each action did. (workspace_id,
// automation_id, trigger_key) is unique: the triggering event's id, or `idle:<message id>` for the
// silence that message began, so a run is recorded, and its actions applied, at most once. Kept 30
// days (the purge-automation-runs schedule). Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table automation_runs (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    automation_id uuid not null,
    trigger_key text not null,
    event_id uuid,
    thread_id uuid,
    status text not null check (status in ('succeeded', 'skipped', 'failed')),
    reason text,
    actions jsonb not null default '[]' check (jsonb_typeof(actions) = 'array'),
    created_at timestamptz not null,
    primary key (workspace_id, id),
    foreign key (workspace_id, automation_id) references automations (workspace_id, id) on delete cascade
  )`,
  sql`create unique index automation_runs_trigger_key on automation_runs (workspace_id, automation_id, trigger_key)`,
  sql`create index automation_runs_automation_idx on automation_runs (workspace_id, automation_id, created_at, id)`,
  sql`create index automation_runs_thread_idx on automation_runs (workspace_id, thread_id, created_at, id) where thread_id is not null`,
  sql`create index automation_runs_created_idx on automation_runs (created_at)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists automation_runs`.execute(db);
}
