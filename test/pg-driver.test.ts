// The pipelined driver's statements held for the COMMIT (db/pg-driver.ts runAtCommit): several may
// be held at once, they reach PostgreSQL in the order they were held, with the next statement or the
// COMMIT, and the error of any of them rolls the whole transaction back.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, transact, type Db } from '../src/db/database.js';
import { runAtCommit } from '../src/db/pg-driver.js';
import { databaseUrl, ownDatabase, type OwnDatabase } from './helpers/server.js';

describe.skipIf(!databaseUrl)('statements held for the COMMIT (needs DATABASE_URL)', () => {
  let own: OwnDatabase;
  let db: Db;
  beforeAll(async () => {
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
    await sql`create table held_order (n int primary key, seen int not null)`.execute(db);
  });
  afterAll(async () => {
    await db?.destroy();
    await own?.drop();
  });

  const rows = async (): Promise<Array<{ n: number; seen: number }>> =>
    (await sql<{ n: number; seen: number }>`select n, seen from held_order order by n`.execute(db)).rows;

  it('when three statements are held, then they all commit, in the order they were held', async () => {
    await transact(db, async (trx) => {
      for (const n of [1, 2, 3]) await runAtCommit(trx, sql`insert into held_order values (${n}, (select count(*)::int from held_order))`);
    });

    expect(await rows()).toEqual([
      { n: 1, seen: 0 },
      { n: 2, seen: 1 },
      { n: 3, seen: 2 },
    ]);
  });

  it('when statements are held and another runs, then they go before it and it sees them', async () => {
    const seen = await transact(db, async (trx) => {
      await runAtCommit(trx, sql`insert into held_order values (10, 0)`);
      await runAtCommit(trx, sql`insert into held_order values (11, 0)`);
      return (await sql<{ count: number }>`select count(*)::int as count from held_order where n >= 10`.execute(trx)).rows[0]!.count;
    });

    expect(seen).toBe(2);
  });

  it('when the second of two held statements fails, then it fails the COMMIT (not its own call) and the transaction rolls back', async () => {
    let heldBoth = false;
    const failed = transact(db, async (trx) => {
      await sql`insert into held_order values (20, 0)`.execute(trx);
      await runAtCommit(trx, sql`insert into held_order values (21, 0)`);
      await runAtCommit(trx, sql`select 1 / 0`);
      heldBoth = true;
    });

    await expect(failed).rejects.toMatchObject({ code: '22012' });
    expect(heldBoth).toBe(true);
    expect((await rows()).filter((row) => row.n >= 20)).toEqual([]);
  });
});
