// Opens the database: PostgreSQL over pg when DATABASE_URL is set, the embedded PGlite otherwise.
import fs from 'node:fs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGlite, types } from '@electric-sql/pglite';
import parseDate from 'postgres-date';
import { PGliteDialect } from 'kysely-pglite-dialect';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /** Data directory of the embedded database, or 'memory://' for a throwaway one. */
  pgliteDir: string;
  poolSize?: number;
}

export function createDatabase(options: DatabaseOptions): Db {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: 5_000,
    });
    // An idle client losing its server must not crash the process; the next query reports it.
    pool.on('error', () => {});
    pool.on('connect', usePreparedStatements);
    return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  }
  if (!options.pgliteDir.startsWith('memory://')) fs.mkdirSync(options.pgliteDir, { recursive: true });
  // PGlite reads timestamps with `new Date(text)`, which takes year 0099 for 1999; parse them the
  // way node-postgres does.
  const parsers = { [types.TIMESTAMPTZ]: (text: string) => parseDate(text) };
  return new Kysely<Database>({ dialect: new PGliteDialect(new PGlite(options.pgliteDir, { parsers })) });
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
