// In the conversation (issue 36): a message may answer another (`reply_to`, the quoted message of the
// same thread's pair, null when the quoted one is unknown here), carries the emoji reactions on it
// (`reactions`, [{emoji, direction, createdAt}], at most one per direction: a reaction is never a
// message of its own) and the buttons or list it offers, or the button a customer tapped
// (`interactive`). Rows from before have none (null, []). Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table messages add column reply_to uuid`,
  sql`alter table messages add column reactions jsonb not null default '[]'::jsonb`,
  sql`alter table messages add column interactive jsonb`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column interactive`.execute(db);
  await sql`alter table messages drop column reactions`.execute(db);
  await sql`alter table messages drop column reply_to`.execute(db);
}
