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
 * Ends a statement that may travel with its transaction's BEGIN, in one round trip: it must be the
 * transaction's first. Elsewhere (the embedded database, outside a transaction) it runs as any
 * statement does.
 */
export const WITH_BEGIN = ' /*sf:with-begin*/';
/**
 * Ends a statement that may wait for its transaction's COMMIT and travel with it, in one round
 * trip: it must be the transaction's last, its result is not returned, and its error fails the
 * commit (the transaction then rolls back). Elsewhere it runs at once.
 */
export const WITH_COMMIT = ' /*sf:with-commit*/';

type Results = pg.QueryResult | pg.QueryResult[];
type QueryConfig = { name?: string; text: string; values: unknown[] };

/** What a prepared statement does on the wire, from pg's Query (not in its type declarations). */
interface WireQuery {
  portal: string;
  prepare(connection: WireConnection): void;
}
interface WireConnection {
  stream: { cork?(): void; uncork?(): void };
  parse(message: { text: string }): void;
  bind(message: object): void;
  execute(message: { portal?: string; rows?: number }): void;
  sync(): void;
}

/**
 * A prepared statement sent in one round trip (one Sync) with a plain statement before it (`begin`)
 * or after it (`commit`), through pg's Submittable interface: pg reads the answers as it reads a
 * multi-statement query's, one result each. An error skips the rest, as in any pipeline.
 */
class Pipelined extends pg.Query {
  constructor(
    config: QueryConfig,
    private readonly around: { before?: string; after?: string },
    callback: (err: Error | undefined, results: Results) => void,
  ) {
    super(config, callback as never);
    this.submit = (connection) => {
      const wire = connection as unknown as WireConnection;
      const plain = (text: string) => {
        wire.parse({ text });
        wire.bind({});
        wire.execute({});
      };
      wire.stream.cork?.();
      try {
        if (this.around.before) plain(this.around.before);
        // pg's own preparation of the statement (parse once per connection, bind, describe,
        // execute), then ours in place of its Sync.
        (this as unknown as WireQuery & { _getRows: unknown })._getRows = () => {
          wire.execute({ portal: (this as unknown as WireQuery).portal });
          if (this.around.after) plain(this.around.after);
          wire.sync();
        };
        (this as unknown as WireQuery).prepare(wire);
      } finally {
        wire.stream.uncork?.();
      }
    };
  }
}

/**
 * Runs every parameterised query of the service as a named prepared statement: PostgreSQL parses
 * and plans each distinct SQL text once per connection instead of on every call. The texts are
 * bounded (Kysely compiles a few shapes per operation, values are always parameters); past
 * MAX_STATEMENTS new texts run unnamed.
 *
 * It also saves round trips at a transaction's ends: Kysely's BEGIN is held back until the
 * transaction's first statement and sent with it (in one round trip when the statement ends with
 * WITH_BEGIN, else just before it), and a statement ending with WITH_COMMIT is held back and sent
 * with the COMMIT. A transaction with no statement sends neither BEGIN nor COMMIT.
 */
function usePreparedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<Results>;
  const configOf = (text: string, values: unknown[]): QueryConfig => {
    if (values.length === 0 || !PREPARABLE.test(text)) return { text, values };
    let name = statementNames.get(text);
    if (name === undefined && statementNames.size < MAX_STATEMENTS) {
      name = `sf_${statementNames.size + 1}`;
      statementNames.set(text, name);
    }
    return name === undefined ? { text, values } : { name, text, values };
  };
  const run = (text: string, values: unknown[]): Promise<Results> => {
    const config = configOf(text, values);
    return config.name === undefined ? query(text, values) : query(config);
  };
  const pipelined = (config: QueryConfig, around: { before?: string; after?: string }): Promise<pg.QueryResult[]> =>
    new Promise((resolve, reject) => {
      void query(new Pipelined(config, around, (err, results) => (err ? reject(err) : resolve(Array.isArray(results) ? results : [results]))));
    });
  const answered = (command: string): Promise<Results> => Promise.resolve({ command, rows: [], rowCount: null, oid: 0, fields: [] });

  let inTransaction = false;
  let beginHeld = false;
  let atCommit: QueryConfig | undefined;
  client.query = ((text: unknown, values?: unknown, callback?: unknown) => {
    if (typeof text !== 'string' || callback !== undefined) return query(text, values, callback);
    const params = Array.isArray(values) ? values : [];
    if (params.length === 0 && text === 'begin') {
      [inTransaction, beginHeld, atCommit] = [true, true, undefined];
      return answered('BEGIN');
    }
    if (params.length === 0 && (text === 'commit' || text === 'rollback')) {
      const [held, carried] = [beginHeld, text === 'commit' ? atCommit : undefined];
      [inTransaction, beginHeld, atCommit] = [false, false, undefined];
      if (held) return answered(text.toUpperCase());
      return carried ? pipelined(carried, { after: 'commit' }).then((results) => results[results.length - 1]!) : query(text);
    }
    if (inTransaction && !beginHeld && text.endsWith(WITH_COMMIT)) {
      atCommit = configOf(text, params);
      return answered('HELD');
    }
    if (beginHeld) {
      beginHeld = false;
      if (text.endsWith(WITH_BEGIN)) return pipelined(configOf(text, params), { before: 'begin' }).then((results) => results[results.length - 1]!);
      return query('begin').then(() => run(text, params));
    }
    return run(text, params);
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
