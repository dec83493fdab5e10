// Opens the database: PostgreSQL over pg when DATABASE_URL is set, the embedded PGlite otherwise.
import fs from 'node:fs';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { PGlite, types } from '@electric-sql/pglite';
import parseDate from 'postgres-date';
import { PGliteDialect } from 'kysely-pglite-dialect';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

/**
 * Runs `fn` in a transaction: a new one, or the caller's when `db` already is one (a request with
 * an Idempotency-Key runs whole inside the transaction that stores its result).
 */
export function transact<T>(db: Db, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db as Transaction<Database>) : db.transaction().execute(fn);
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /** Data directory of the embedded database, or 'memory://' for a throwaway one. */
  pgliteDir: string;
  poolSize?: number;
  /** How long a query waits for a connection before failing (503 to the client). */
  poolWaitMs?: number;
  /** PostgreSQL statement_timeout of every connection; 0 for none. */
  statementTimeoutMs?: number;
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
    });
    // A connection that breaks (PostgreSQL restarted, failed over, killed the backend) emits
    // 'error' on its client, idle or checked out. The pool's listener covers idle clients and
    // drops them; a checked-out client needs its own, or the process dies of an unhandled 'error'.
    // Its query fails (503 to that request) and the pool discards it on release.
    pool.on('error', () => {});
    pool.on('connect', (client) => {
      client.on('error', () => {});
      usePreparedStatements(client);
    });
    return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  }
  if (!options.pgliteDir.startsWith('memory://')) fs.mkdirSync(options.pgliteDir, { recursive: true });
  // PGlite reads timestamps with `new Date(text)`, which takes year 0099 for 1999; parse them the
  // way node-postgres does.
  const parsers = { [types.TIMESTAMPTZ]: (text: string) => parseDate(text) };
  const pglite = new PGlite(options.pgliteDir, { parsers });
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  embedded.set(db, pglite);
  return db;
}

const embedded = new WeakMap<Db, PGlite>();

/** The embedded database behind `db` (for LISTEN, which Kysely does not offer); undefined on PostgreSQL. */
export function embeddedDatabaseOf(db: Db): PGlite | undefined {
  return embedded.get(db);
}

const statementNames = new Map<string, string>();
const MAX_STATEMENTS = 1_000;
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;

/**
 * Runs every parameterised query of the service as a named prepared statement: PostgreSQL parses
 * and plans each distinct SQL text once per connection instead of on every call. The texts are
 * bounded (Kysely compiles a few shapes per operation, values are always parameters); past
 * MAX_STATEMENTS new texts run unnamed.
 */
function usePreparedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, values?: unknown, callback?: unknown) => {
    if (typeof text === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined && PREPARABLE.test(text)) {
      let name = statementNames.get(text);
      if (name === undefined && statementNames.size < MAX_STATEMENTS) {
        name = `sf_${statementNames.size + 1}`;
        statementNames.set(text, name);
      }
      if (name !== undefined) return query({ name, text, values });
    }
    return callback === undefined ? query(text, values) : query(text, values, callback);
  }) as typeof client.query;
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
