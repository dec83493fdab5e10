// NPS asked in the conversation (issue 23). A thread remembers when its NPS question was last sent
// (`nps_requested_at`); a customer's score finds the pending request of its (contact, channel) through
// a partial index that holds only asked, unanswered threads. An outbound message may carry quick
// replies (Instagram's buttons, `[{title, payload}]`, the question's 0..10). An event may say where
// its change came from (`source`: an nps.answered by `api` or from the `conversation`); the
// nps.answered events recorded before this migration all came through the API. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table threads add column nps_requested_at timestamptz`,
  sql`create index threads_nps_pending_idx on threads (workspace_id, contact_id, channel_id, nps_requested_at)
        where nps_requested_at is not null and nps_score is null`,
  sql`alter table messages add column quick_replies jsonb`,
  sql`alter table events add column source text check (source in ('api', 'conversation'))`,
  sql`update events set source = 'api' where type = 'nps.answered'`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table events drop column source`.execute(db);
  await sql`alter table messages drop column quick_replies`.execute(db);
  await sql`drop index threads_nps_pending_idx`.execute(db);
  await sql`alter table threads drop column nps_requested_at`.execute(db);
}
