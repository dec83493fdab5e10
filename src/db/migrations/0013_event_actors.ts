// Who made each change an event records: the actor's type and id in two columns, as a thread's
// history keeps them, rather than inside `data` (the object as the API returned it, which the
// erasure scrub rewrites): the event's shape is built when it is read. Events recorded before have
// no actor (null), and are gone after the 30 days of retention. Adding nullable columns without a
// default rewrites nothing; the checks read the rows once. A system actor has no id, any other one
// has. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table events
        add column actor_type text check (actor_type in ('api_key', 'agent', 'automation', 'system')),
        add column actor_id uuid,
        add constraint events_actor_check check (case when actor_type is null then actor_id is null else (actor_type = 'system') = (actor_id is null) end)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table events drop constraint events_actor_check, drop column actor_id, drop column actor_type`.execute(db);
}
