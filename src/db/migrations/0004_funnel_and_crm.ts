// The funnel and the CRM: each workspace's ordered stages (the four defaults made for every
// workspace that exists), a thread's stage, closing time and history of changes, a channel's
// default agent, erasable contacts, and the NPS daily rollup broken down by channel, agent and
// stage. Existing threads enter their workspace's first stage. Roll it out with instances of older
// code stopped: they would open threads without a stage. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

/** A UUIDv7 made by PostgreSQL for rows the service did not write: the time, the version, then random bits. */
const uuid7 = (seq: string) =>
  `encode(overlay(uuid_send(gen_random_uuid()) placing int8send(((extract(epoch from clock_timestamp()) * 1000)::bigint << 16) | 28672 | ((${seq}) & 4095)) from 1 for 8), 'hex')::uuid`;

/** The groups of an answer in nps_daily_groups; an answer without an agent counts under the nil UUID. */
export const NO_AGENT = '00000000-0000-0000-0000-000000000000';

/**
 * Fills an empty nps_daily_groups from the answers in threads. Plain SQL text, so the bench's bulk
 * seed runs the same statement after loading threads.
 */
export const NPS_DAILY_GROUPS_BACKFILL = `
  insert into nps_daily_groups (workspace_id, dimension, day, key, promotores, neutros, detratores)
  select t.workspace_id, g.dimension, (t.nps_created_at at time zone 'UTC')::date, g.key,
         count(*) filter (where t.nps_score >= 9),
         count(*) filter (where t.nps_score between 7 and 8),
         count(*) filter (where t.nps_score <= 6)
    from threads t
   cross join lateral (values ('channel', t.channel_id), ('agent', coalesce(t.nps_agent_id, '${NO_AGENT}'::uuid)), ('stage', t.nps_stage_id)) g(dimension, key)
   where t.nps_created_at is not null
   group by 1, 2, 3, 4`;

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table stages (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    id uuid not null,
    name text not null,
    position int not null check (position >= 1),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (workspace_id, id),
    constraint stages_position_key unique (workspace_id, position) deferrable initially deferred
  )`,
  sql.raw(`insert into stages (workspace_id, id, name, position)
    select w.id, ${uuid7('d.position')}, d.name, d.position
      from workspaces w
     cross join (values ('Novo', 1), ('Em atendimento', 2), ('Aguardando cliente', 3), ('Resolvido', 4)) d(name, position)`),

  sql`alter table threads
    add column stage_id uuid,
    add column stage_entered_at timestamptz,
    add column closed_at timestamptz,
    add column nps_agent_id uuid,
    add column nps_stage_id uuid`,
  // A closed thread's closing time was not kept: its last update is the best there is.
  sql`update threads t
     set stage_id = s.id,
         stage_entered_at = t.created_at,
         closed_at = case when t.status = 'closed' then t.updated_at end,
         nps_agent_id = case when t.nps_created_at is not null then t.agent_id end,
         nps_stage_id = case when t.nps_created_at is not null then s.id end
    from stages s
   where s.workspace_id = t.workspace_id and s.position = 1`,
  sql`alter table threads
    alter column stage_id set not null,
    alter column stage_entered_at set not null,
    add constraint threads_workspace_id_stage_id_fkey foreign key (workspace_id, stage_id) references stages (workspace_id, id),
    add constraint threads_closed_at_check check ((status = 'closed') = (closed_at is not null)),
    add constraint threads_nps_stage_check check (nps_created_at is null or nps_stage_id is not null)`,
  // The stage filter of the thread list, and what deleting a stage checks its threads with.
  sql`create index threads_stage_list_idx on threads (workspace_id, stage_id, created_at desc, id desc)`,
  // The funnel's `current`: open threads per stage, counted from the index alone.
  sql`create index threads_open_stage_idx on threads (workspace_id, stage_id) where status = 'open'`,
  // The edge days of an NPS breakdown by channel, agent or stage.
  sql`create index threads_nps_groups_idx on threads (workspace_id, nps_created_at) include (nps_score, channel_id, nps_agent_id, nps_stage_id)
      where nps_created_at is not null`,

  sql`create table thread_history (
    workspace_id uuid not null,
    id uuid not null,
    thread_id uuid not null,
    field text not null check (field in ('status', 'stageId', 'agentId')),
    from_status text check (from_status in ('open', 'closed')),
    to_status text check (to_status in ('open', 'closed')),
    from_id uuid,
    to_id uuid,
    stay_ms bigint check (stay_ms >= 0),
    actor_type text not null check (actor_type in ('api_key', 'agent', 'system')),
    actor_id uuid,
    reason text,
    created_at timestamptz not null,
    primary key (workspace_id, id),
    foreign key (workspace_id, thread_id) references threads (workspace_id, id) on delete cascade,
    check ((field = 'status') = (to_status is not null)),
    check (field = 'status' or (from_status is null and to_status is null)),
    check (field <> 'status' or (from_id is null and to_id is null)),
    check (field <> 'stageId' or to_id is not null),
    check ((stay_ms is not null) = (field = 'stageId' and from_id is not null)),
    check ((actor_type = 'system') = (actor_id is null))
  )`,
  sql`create index thread_history_list_idx on thread_history (workspace_id, thread_id, created_at, id)`,
  sql`create index thread_history_stage_entries_idx on thread_history (workspace_id, to_id, created_at) where field = 'stageId'`,
  sql`create index thread_history_stage_exits_idx on thread_history (workspace_id, from_id, created_at) include (stay_ms)
      where field = 'stageId' and from_id is not null`,

  sql`alter table channels
    add column default_agent_id uuid,
    add constraint channels_workspace_id_default_agent_id_fkey foreign key (workspace_id, default_agent_id)
      references agents (workspace_id, id) on delete set null (default_agent_id)`,

  sql`alter table contacts
    add column erased_at timestamptz,
    add constraint contacts_erased_check check (erased_at is null or (name = '' and phone is null and email is null))`,
  // Lists show contacts that were not erased: the list's index holds only those, so its count stays index-only.
  sql`drop index contacts_list_idx`,
  sql`create index contacts_list_idx on contacts (workspace_id, created_at, id) where erased_at is null`,
  sql`alter table messages alter column content drop not null`,

  sql`create table nps_daily_groups (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    dimension text not null check (dimension in ('channel', 'agent', 'stage')),
    day date not null,
    key uuid not null,
    promotores int not null,
    neutros int not null,
    detratores int not null,
    primary key (workspace_id, dimension, day, key)
  )`,
  sql.raw(NPS_DAILY_GROUPS_BACKFILL),
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const undo = [
    sql`drop table if exists nps_daily_groups`,
    sql`update messages set content = '' where content is null`,
    sql`alter table messages alter column content set not null`,
    sql`drop index if exists contacts_list_idx`,
    sql`create index contacts_list_idx on contacts (workspace_id, created_at, id)`,
    sql`alter table contacts drop constraint if exists contacts_erased_check, drop column if exists erased_at`,
    sql`alter table channels drop column if exists default_agent_id`,
    sql`drop table if exists thread_history`,
    sql`drop index if exists threads_nps_groups_idx`,
    sql`drop index if exists threads_open_stage_idx`,
    sql`drop index if exists threads_stage_list_idx`,
    sql`alter table threads
      drop column if exists stage_id,
      drop column if exists stage_entered_at,
      drop column if exists closed_at,
      drop column if exists nps_agent_id,
      drop column if exists nps_stage_id`,
    sql`drop table if exists stages`,
  ];
  for (const statement of undo) await statement.execute(db);
}
