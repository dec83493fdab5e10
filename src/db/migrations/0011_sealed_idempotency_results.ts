// A stored Idempotency-Key result whose answer holds a secret (a new webhook endpoint's) is kept
// sealed under SECRETS_KEY, as the secret itself is: `response_sealed` says `response` is a sealed
// value rather than JSON text. Such results are few, and start-up and `npm run secrets:rotate` look
// for them among every stored result: the partial index lists them alone, so neither reads the whole
// table. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table idempotency_keys add column response_sealed boolean not null default false`,
  sql`create index idempotency_keys_sealed on idempotency_keys (created_at) where response_sealed`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // A sealed result cannot be turned back into its JSON text here (the key is not at hand): gone.
  await sql`delete from idempotency_keys where response_sealed`.execute(db);
  await sql`drop index if exists idempotency_keys_sealed`.execute(db);
  await sql`alter table idempotency_keys drop column if exists response_sealed`.execute(db);
}
