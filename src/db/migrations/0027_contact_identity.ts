// Who the customer is (issue 35). A contact gains the WhatsApp business-scoped user id Meta sends
// (`whatsapp_user_id`, unique per workspace), the WhatsApp username last delivered (shown, never a
// key), and the integrator's own id (`external_id`, unique per workspace). A contact merged into
// another is gone as an erased one is (`erased_at`) and remembers where it went (`merged_into`),
// so its id answers `contact_merged`. A `contact.merged` event keeps the ids it folded (`merged_ids`).
// Existing phones stay as they are and nothing is merged: a Brazilian mobile is found in either form
// by looking both up in contacts_phone_key (two probes of the unique index, as fast as one exact match).
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table contacts add column whatsapp_user_id text`,
  sql`alter table contacts add column whatsapp_username text`,
  sql`alter table contacts add column external_id text`,
  sql`alter table contacts add column merged_into uuid`,
  sql`create unique index contacts_whatsapp_user_id_key on contacts (workspace_id, whatsapp_user_id)`,
  sql`create unique index contacts_external_id_key on contacts (workspace_id, external_id)`,
  sql`alter table events add column merged_ids uuid[]`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table events drop column merged_ids`.execute(db);
  await sql`drop index contacts_external_id_key`.execute(db);
  await sql`drop index contacts_whatsapp_user_id_key`.execute(db);
  await sql`alter table contacts drop column merged_into`.execute(db);
  await sql`alter table contacts drop column external_id`.execute(db);
  await sql`alter table contacts drop column whatsapp_username`.execute(db);
  await sql`alter table contacts drop column whatsapp_user_id`.execute(db);
}
