// The live stream is a consumer of the event log (src/stream/announce.ts, registered at start-up
// like the log's other consumers): the statement that records an event sends its `NOTIFY
// events_added` while the workspace is streamed, so the trigger of migrations 0014 and 0018 goes.
// The lease table (stream_listeners) and the payload (the writing transaction's id) stay as they were.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists events_announce on events`.execute(db);
  await sql`drop function if exists events_announce()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create or replace function events_announce() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from stream_listeners where workspace_id = new.workspace_id and expires_at > now()) then
        perform pg_notify('events_added', pg_current_xact_id()::text);
      end if;
      return null;
    end
  $$`.execute(db);
  await sql`create trigger events_announce after insert on events for each row execute function events_announce()`.execute(db);
}
