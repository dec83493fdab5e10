// `all` keeps meaning every scope. A key made with `all` stores the scopes that existed then, so a key
// made before settings and automations existed could not read or change them. Every key that holds all
// eleven scopes of before (what `all` gave) gains settings:read|write and automations:read|write; a key
// made with a narrower list keeps it. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const BEFORE = [
  'agents:read',
  'agents:write',
  'contacts:read',
  'contacts:write',
  'messages:read',
  'messages:write',
  'channels:write',
  'funnel:read',
  'funnel:write',
  'webhooks:read',
  'webhooks:write',
];
const ADDED = ['settings:read', 'settings:write', 'automations:read', 'automations:write'];

export async function up(db: Kysely<any>): Promise<void> {
  await sql`update api_keys
               set scopes = scopes || array(select s from unnest(${ADDED}::text[]) s where s <> all (scopes))
             where scopes @> ${BEFORE}::text[]`.execute(db);
}

export async function down(): Promise<void> {
  // A key cannot tell which of its scopes it was given and which this migration added: nothing to undo.
}
