// The ?label= list on a sizeable table, timed through db/contacts.ts (BENCHMARKS.md, "Labels"):
// workspace A has 100,000 contacts labelled Comum and 10 labelled Raro; workspace B has 100,000
// labelled Raro. Prints the total and the median/max of 20 lists of each label.
//   npx tsx bench/labels.ts postgres://root@127.0.0.1:5432/<a scratch database>
import { sql } from 'kysely';
import { listContacts } from '../src/db/contacts.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';

const url = process.argv[2];
if (!url) throw new Error('usage: npx tsx bench/labels.ts <DATABASE_URL of a scratch database>');
const db = createDatabase({ databaseUrl: url, pgliteDir: 'memory://' });
await migrateToLatest(db);
const [a, b] = ['01900000-0000-7000-8000-00000000000a', '01900000-0000-7000-8000-00000000000b'];
const { rows } = await sql<{ n: number }>`select count(*)::int as n from contacts where workspace_id in (${a}, ${b})`.execute(db);
if (rows[0]!.n === 0) {
  await sql`insert into workspaces (id, name) values (${a}, 'A'), (${b}, 'B') on conflict do nothing`.execute(db);
  const seed = (ws: string, n: number, label: string) => sql`
    insert into contacts (workspace_id, id, name, labels, label_keys, created_at, updated_at)
    select ${ws}::uuid, gen_random_uuid(), 'c' || i, array[${label}], array[${`${ws}:${label.toLowerCase()}`}], now(), now()
      from generate_series(1, ${n}) i`;
  await seed(a, 100_000, 'Comum').execute(db);
  await seed(a, 10, 'Raro').execute(db);
  await seed(b, 100_000, 'Raro').execute(db);
  await sql`analyze contacts`.execute(db);
}
for (const label of ['raro', 'comum', 'raro', 'comum']) {
  const runs: number[] = [];
  let total = 0;
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    total = (await listContacts(db, a, { labels: [label] }, 1, 20)).total;
    runs.push(performance.now() - started);
  }
  runs.sort((x, y) => x - y);
  console.log(`?label=${label}: total ${total}, median ${runs[10]!.toFixed(2)} ms, max ${runs[19]!.toFixed(2)} ms over 20`);
}
await db.destroy();
