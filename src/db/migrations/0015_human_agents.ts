// People on the team beside AI agents: agents.type ('ai' for every existing row),
// a person's availability and capacity, and the moment of their last round-robin assignment, kept
// on the row by the assigning transaction so choosing the next person never scans history.
// model and instructions belong to AI agents only, availability to people only (the check says so).
// Two indexes, workspace first: the round robin's candidates in the order it takes them (only
// active, online people, so the index stays as small as the team on duty), and open threads by
// agent, which counts a candidate's load against its capacity. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table agents
        add column type text not null default 'ai' check (type in ('ai', 'human')),
        add column availability text check (availability in ('online', 'away', 'offline')),
        add column capacity integer check (capacity between 1 and 1000),
        add column last_assigned_at timestamptz,
        alter column instructions drop not null,
        alter column model drop not null,
        add constraint agents_type_fields_check check (
          case type
            when 'ai' then instructions is not null and model is not null and availability is null and capacity is null
            else instructions is null and model is null and availability is not null
          end)`,
  sql`create index agents_round_robin_idx on agents (workspace_id, last_assigned_at asc nulls first, id)
        where type = 'human' and status = 'active' and availability = 'online'`,
  sql`create index agents_type_list_idx on agents (workspace_id, type, created_at, id)`,
  sql`create index threads_open_agent_idx on threads (workspace_id, agent_id) where status = 'open' and agent_id is not null`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists threads_open_agent_idx`.execute(db);
  await sql`drop index if exists agents_type_list_idx`.execute(db);
  await sql`drop index if exists agents_round_robin_idx`.execute(db);
  await sql`delete from agents where type = 'human'`.execute(db);
  await sql`alter table agents
              drop constraint agents_type_fields_check,
              alter column model set not null,
              alter column instructions set not null,
              drop column last_assigned_at,
              drop column capacity,
              drop column availability,
              drop column type`.execute(db);
}
