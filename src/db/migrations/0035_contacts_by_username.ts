// Contacts listed by WhatsApp username (`?whatsappUsername=`, case ignored): an index of the
// contacts that have one, lower-cased, in the list's order. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index contacts_whatsapp_username_idx on contacts (workspace_id, lower(whatsapp_username), created_at, id)
            where whatsapp_username is not null and erased_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index contacts_whatsapp_username_idx`.execute(db);
}
