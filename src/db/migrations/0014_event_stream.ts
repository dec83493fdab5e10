// The live event stream (GET /events/stream). Each event keeps the id of the transaction that wrote
// it (xid8, 64 bits: no wraparound), and its commit is announced with NOTIFY on `events_added`
// (payload: that transaction id) by a trigger, whoever records the event. A stream sends events in
// (commit_xid, id) order and only below the oldest transaction still running (src/stream/log.ts): no event
// can later appear before one already sent, so a resume after any event has no gap and no duplicate.
// Stream tokens let a browser's EventSource, which sends no Authorization header, open a stream.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const up_ = [
  sql`alter table events add column commit_xid xid8`,
  sql`alter table events alter column commit_xid set default pg_current_xact_id()`,
  sql`create index events_stream_idx on events (workspace_id, commit_xid, id)`,
  sql`create function events_announce() returns trigger language plpgsql as $$
    begin
      perform pg_notify('events_added', pg_current_xact_id()::text);
      return null;
    end
  $$`,
  sql`create trigger events_announce after insert on events for each row execute function events_announce()`,
  sql`create table stream_tokens (
    token_hash text primary key,
    workspace_id uuid not null,
    api_key_id uuid not null references api_keys (id) on delete cascade,
    expires_at timestamptz not null
  )`,
  sql`create index stream_tokens_expires_at_idx on stream_tokens (expires_at)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of up_) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists stream_tokens`.execute(db);
  await sql`drop trigger if exists events_announce on events`.execute(db);
  await sql`drop function if exists events_announce()`.execute(db);
  await sql`drop index if exists events_stream_idx`.execute(db);
  await sql`alter table events drop column if exists commit_xid`.execute(db);
}
