// Notifications only for workspaces someone streams. Migration 0014's trigger sent `NOTIFY
// events_added` for every event, and PostgreSQL wakes every listening backend of the database for
// each one (the job workers' too), streams open or not. Now an instance streaming a workspace holds
// a lease on it here (src/stream/leases.ts: taken with the workspace's first stream on the
// instance, renewed while it has any, let go after; an instance that dies stops counting when its
// leases expire), and the trigger notifies only while the event's workspace has an unexpired one.
// Streams never depended on the notification for completeness (they read the log, and every second
// without one); it only wakes them at once. Unlogged: leases are renewed within seconds, so losing
// them in a crash or a failover costs at most that long of notifications, and renewals write no WAL.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const up_ = [
  sql`create unlogged table stream_listeners (
    workspace_id uuid not null,
    instance_id uuid not null,
    expires_at timestamptz not null,
    primary key (workspace_id, instance_id)
  )`,
  sql`create or replace function events_announce() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from stream_listeners where workspace_id = new.workspace_id and expires_at > now()) then
        perform pg_notify('events_added', pg_current_xact_id()::text);
      end if;
      return null;
    end
  $$`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of up_) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create or replace function events_announce() returns trigger language plpgsql as $$
    begin
      perform pg_notify('events_added', pg_current_xact_id()::text);
      return null;
    end
  $$`.execute(db);
  await sql`drop table if exists stream_listeners`.execute(db);
}
