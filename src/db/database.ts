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
    return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  }
  if (!options.pgliteDir.startsWith('memory://')) fs.mkdirSync(options.pgliteDir, { recursive: true });
  // PGlite reads timestamps with `new Date(text)`, which takes year 0099 for 1999; parse them the
  // way node-postgres does.
  const parsers = { [types.TIMESTAMPTZ]: (text: string) => parseDate(text) };
  return new Kysely<Database>({ dialect: new PGliteDialect(new PGlite(options.pgliteDir, { parsers })) });
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
