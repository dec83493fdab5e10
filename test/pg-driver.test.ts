// The pipelined driver's statements held for the COMMIT (db/pg-driver.ts runAtCommit): several may
// be held at once, they reach PostgreSQL in the order they were held, with the next statement or the
// COMMIT, and the error of any of them rolls the whole transaction back. A read held for the next
// statement (readWithNext) is answered on its own, whether that statement fails or it does.
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, transact, type Db } from '../src/db/database.js';
import { readWithNext, runAtCommit } from '../src/db/pg-driver.js';
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

describe.skipIf(!databaseUrl)('a read held for the next statement (needs DATABASE_URL)', () => {
  let own: OwnDatabase;
  let db: Db;
  beforeAll(async () => {
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
    await sql`create table read_next (n int primary key)`.execute(db);
    await sql`insert into read_next values (1)`.execute(db);
    await sql`create sequence read_next_seq`.execute(db);
  });
  afterAll(async () => {
    await db?.destroy();
    await own?.drop();
  });

  it("when the statement sent with it fails, then the read still has its rows, and the error is the statement's", async () => {
    let rows: unknown[] = [];
    const failed = transact(db, async (trx) => {
      const read = await readWithNext<{ n: number }>(trx, CompiledQuery.raw('select n from read_next'));
      try {
        await sql`insert into read_next values (1)`.execute(trx);
      } finally {
        rows = await read.rows();
      }
    });

    await expect(failed).rejects.toMatchObject({ code: '23505' });
    expect(rows).toEqual([{ n: 1 }]);
  });

  it("when the read fails, then the statement sent with it does not run, and fails with the read's error", async () => {
    const failed = transact(db, async (trx) => {
      const read = await readWithNext(trx, CompiledQuery.raw('select 1 / 0'));
      // A sequence advances even in a transaction rolled back: had the statement run, it would show.
      await sql`select nextval('read_next_seq')`.execute(trx);
      return read;
    });

    await expect(failed).rejects.toMatchObject({ code: '22012' });
    expect((await sql<{ is_called: boolean }>`select is_called from read_next_seq`.execute(db)).rows).toEqual([{ is_called: false }]);
  });
});
