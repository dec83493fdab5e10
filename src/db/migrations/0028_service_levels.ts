// Service levels (issue 37): SLA policies in `position` order (as automations: a deferred unique
// constraint checks positions at commit); each thread's running clocks (one row per thread and
// metric while it runs, with its due and warning times and whether they were recorded); one metric
// row per response or closing, written when it happens, that the response-time report reads without
// replaying messages (a covering index over the window's column); the thread's `sla` as the API
// shows it; an event's `metric` (sla.warning, sla.breached); and `reports:read` for every key that
// held every scope before it existed. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const BEFORE = [
  'agents:read',
  'agents:write',
  'contacts:read',
  'contacts:write',
  'messages:read',
  'messages:write',
  'channels:write',
  'funnel:read',
  'funnel:write',
  'webhooks:read',
  'webhooks:write',
  'settings:read',
  'settings:write',
  'automations:read',
  'automations:write',
];
const ADDED = ['reports:read'];

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table sla_policies (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    name text not null,
    enabled boolean not null default true,
    position int not null check (position >= 1),
    conditions jsonb not null default '{}' check (jsonb_typeof(conditions) = 'object'),
    targets jsonb not null check (jsonb_typeof(targets) = 'object'),
    business_hours_only boolean not null default false,
    human_only boolean not null default false,
    warn_before_minutes int check (warn_before_minutes between 1 and 525600),
    created_at timestamptz not null,
    updated_at timestamptz not null,
    primary key (workspace_id, id),
    constraint sla_policies_position_key unique (workspace_id, position) deferrable initially deferred
  )`,
  sql`alter table threads add column sla jsonb`,
  sql`create table sla_clocks (
    workspace_id uuid not null,
    thread_id uuid not null,
    metric text not null check (metric in ('firstResponse', 'nextResponse', 'resolution')),
    started_at timestamptz not null,
    policy_id uuid,
    due_at timestamptz,
    warn_at timestamptz,
    warned boolean not null default false,
    breached boolean not null default false,
    primary key (workspace_id, thread_id, metric),
    foreign key (workspace_id, thread_id) references threads (workspace_id, id) on delete cascade
  )`,
  sql`create table sla_metrics (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    thread_id uuid not null,
    metric text not null check (metric in ('firstResponse', 'nextResponse', 'resolution')),
    channel_id uuid not null,
    stage_id uuid,
    agent_id uuid,
    by_ai boolean,
    started_at timestamptz not null,
    happened_at timestamptz not null,
    seconds double precision not null,
    business_seconds double precision not null,
    policy_id uuid,
    due_at timestamptz,
    within_sla boolean,
    primary key (workspace_id, id)
  )`,
  sql`create index sla_metrics_window_idx on sla_metrics (workspace_id, happened_at)
        include (metric, seconds, business_seconds, within_sla, by_ai, agent_id, channel_id, stage_id)`,
  sql`alter table events add column metric text`,
  sql`update api_keys
         set scopes = scopes || array(select s from unnest(${ADDED}::text[]) s where s <> all (scopes))
       where scopes @> ${BEFORE}::text[]`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table events drop column if exists metric`.execute(db);
  await sql`drop table if exists sla_metrics`.execute(db);
  await sql`drop table if exists sla_clocks`.execute(db);
  await sql`alter table threads drop column if exists sla`.execute(db);
  await sql`drop table if exists sla_policies`.execute(db);
}
