// One channel per Meta account, across all workspaces: a WhatsApp phone_number_id, or an Instagram
// account id, is the externalId of at most one channel of its type (sandbox channels have none).
// Meta sends an account's webhooks to one callback URL, so a second channel on it would send as the
// account and never hear back. Existing duplicates are not resolved here: which channel is the real
// connection is the operator's call, and disconnecting one forgets its secrets. The migration then
// stops, naming them. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

/** Duplicated accounts named in the error; the rest are counted. */
const LISTED = 20;

export async function up(db: Kysely<any>): Promise<void> {
  const { rows } = await sql<{ type: string; external_id: string; channels: string }>`
    select type, external_id, string_agg(id::text, ', ' order by created_at, id) as channels
      from channels
     where external_id is not null
     group by type, external_id
    having count(*) > 1
     order by type, external_id`.execute(db);
  if (rows.length > 0) {
    const listed = rows.slice(0, LISTED).map((row) => `${row.type} ${row.external_id}: channels ${row.channels}`);
    if (rows.length > LISTED) listed.push(`and ${rows.length - LISTED} more`);
    throw new Error(
      `a Meta account may be connected to one channel only, and these are connected to several (oldest first): ${listed.join('; ')}. ` +
        `Keep one of each connected and turn the others back to the sandbox (PATCH /v1/channels/{id} {"provider":"sandbox"} on the running version, ` +
        `or: update channels set provider = 'sandbox', external_id = null, secrets = null where id = '<id>'), then start again.`,
    );
  }
  await sql`create unique index channels_meta_account_key on channels (type, external_id) where external_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists channels_meta_account_key`.execute(db);
}
