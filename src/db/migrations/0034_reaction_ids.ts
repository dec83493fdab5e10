// A customer's reaction is applied once, whatever Meta sends again: each message keeps the provider
// ids of the last customer reactions applied to it (`reaction_ids`, at most 20), so that a delivery
// Meta sends again later, after a newer reaction, is not applied over it a second time. Rows from
// before have none. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column reaction_ids text[] not null default '{}'::text[]`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column reaction_ids`.execute(db);
}
