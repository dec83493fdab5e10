// Automations (issue 22): a workspace's rules, in `position` order (1, 2, 3, ... without gaps, a
// deferred unique constraint checking each change of positions at commit, as stages do). The
// trigger, conditions and actions are kept as the API shows them (jsonb), checked by the service
// before they are stored. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table automations (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    name text not null,
    enabled boolean not null default true,
    position int not null check (position >= 1),
    trigger jsonb not null check (jsonb_typeof(trigger) = 'object'),
    conditions jsonb not null default '{}' check (jsonb_typeof(conditions) = 'object'),
    actions jsonb not null check (jsonb_typeof(actions) = 'array'),
    created_at timestamptz not null,
    updated_at timestamptz not null,
    primary key (workspace_id, id),
    constraint automations_position_key unique (workspace_id, position) deferrable initially deferred
  )`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists automations`.execute(db);
}
