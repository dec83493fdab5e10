// Opens the database: PostgreSQL over pg when DATABASE_URL is set, the embedded PGlite otherwise.
import fs from 'node:fs';
import { Kysely, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { PGlite, types } from '@electric-sql/pglite';
import parseDate from 'postgres-date';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { CorkableClient, pipelinedPostgresDialect } from './pg-driver.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

/** What runs once a transaction begun by transact has committed (afterCommit), by transaction. */
const onCommit = new WeakMap<Transaction<Database>, Array<() => void>>();

/**
 * Runs `fn` in a transaction: a new one, or the caller's when `db` already is one (a request with
 * an Idempotency-Key runs whole inside the transaction that stores its result). What afterCommit
 * registered runs once it has committed.
 */
export async function transact<T>(db: Db, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) return fn(db as Transaction<Database>);
  const committed: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => {
    onCommit.set(trx, committed);
    return fn(trx);
  });
  for (const callback of committed) callback();
  return result;
}

/** What afterCommit holds for `trx`: undefined outside a transaction begun by transact. */
const committedOf = (trx: Db): Array<() => void> | undefined => (trx.isTransaction ? onCommit.get(trx as Transaction<Database>) : undefined);

/**
 * Runs `callback` once `trx`'s transaction has committed, never when it rolls back: what counts
 * only what committed (a metric of recorded rows). At once outside a transaction begun by transact.
 * It must not throw: its transaction's caller would see a failure of what has committed.
 */
export function afterCommit(trx: Db, callback: () => void): void {
  const committed = committedOf(trx);
  if (committed) committed.push(callback);
  else callback();
}

/**
 * For work under a savepoint, taken when it is set: `forget()`, once the work is rolled back to it,
 * forgets what afterCommit registered for `trx` since.
 */
export function afterCommitSince(trx: Db): { forget(): void } {
  const committed = committedOf(trx);
  const mark = committed?.length ?? 0;
  return { forget: () => void committed?.splice(mark) };
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /** Data directory of the embedded database, or 'memory://' for a throwaway one. */
  pgliteDir: string;
  /** A dumped data directory the embedded database starts from instead of an empty one (dumpDataDir). */
  pgliteData?: Blob;
  poolSize?: number;
  /** How long a query waits for a connection before failing (503 to the client). */
  poolWaitMs?: number;
  /** PostgreSQL statement_timeout of every connection; 0 for none. */
  statementTimeoutMs?: number;
  /**
   * Run parameterised queries as named prepared statements (default true); false for a pooler in
   * transaction mode (PgBouncer before 1.21), where a statement prepared on one server connection
   * is unknown to the next.
   */
  preparedStatements?: boolean;
}

export function createDatabase(options: DatabaseOptions): Db {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.poolWaitMs ?? 5_000,
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
      // A server that vanished without closing the socket is noticed instead of waited on forever.
      keepAlive: true,
      // node-postgres' pipeline mode: a query is written at once, without waiting for the answers
      // of those before it, so a transaction's BEGIN and its first statement, and its last statement
      // and the COMMIT, share a round trip; on a client whose socket the driver corks, they also
      // leave in one write (see pg-driver.ts).
      pipeline: true,
      Client: CorkableClient,
    });
    // A connection that breaks (PostgreSQL restarted, failed over, killed the backend) emits
    // 'error' on its client, idle or checked out. The pool's listener covers idle clients and
    // drops them; a checked-out client needs its own, or the process dies of an unhandled 'error'.
    // Its query fails (503 to that request) and the pool discards it on release.
    pool.on('error', () => {});
    pool.on('connect', (client) => {
      client.on('error', () => {});
    });
    const db = new Kysely<Database>({ dialect: pipelinedPostgresDialect(pool, options.preparedStatements ?? true) });
    pools.set(db, pool);
    return db;
  }
  if (!options.pgliteDir.startsWith('memory://')) fs.mkdirSync(options.pgliteDir, { recursive: true });
  // PGlite reads timestamps with `new Date(text)`, which takes year 0099 for 1999; parse them the
  // way node-postgres does.
  const parsers = { [types.TIMESTAMPTZ]: (text: string) => parseDate(text) };
  const pglite = new PGlite(options.pgliteDir, { parsers, ...(options.pgliteData ? { loadDataDir: options.pgliteData } : {}) });
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  embedded.set(db, pglite);
  return db;
}

const embedded = new WeakMap<Db, PGlite>();
const pools = new WeakMap<Db, pg.Pool>();

/** The connection pool behind `db` now (GET /metrics); undefined on the embedded database, which has none. */
export function poolStatsOf(db: Db): { inUse: number; idle: number; waiting: number } | undefined {
  const pool = pools.get(db);
  return pool && { inUse: pool.totalCount - pool.idleCount, idle: pool.idleCount, waiting: pool.waitingCount };
}

/** The embedded database behind `db` (for LISTEN, which Kysely does not offer); undefined on PostgreSQL. */
export function embeddedDatabaseOf(db: Db): PGlite | undefined {
  return embedded.get(db);
}

/** True when the database answers a trivial query within the timeout. */
export async function isDatabaseReachable(db: Db, timeoutMs = 2_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const probe = sql`select 1`.execute(db).then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether the PostgreSQL server behind `db` runs with autovacuum off. The embedded database is
 * one process of the service's own, with no autovacuum to run: false.
 */
export async function autovacuumOff(db: Db): Promise<boolean> {
  if (embedded.has(db)) return false;
  const { rows } = await sql<{ off: boolean }>`select current_setting('autovacuum') = 'off' as off`.execute(db);
  return rows[0]?.off ?? false;
}
