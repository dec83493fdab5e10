// Kysely's dialect for PostgreSQL over a pg pool in pipeline mode, on public APIs only (Kysely's
// Driver interface; pg's `pipeline`, `Client` and `stream` options and named statements; Node's
// socket cork): a transaction's BEGIN and COMMIT cost no round trip (and no wake-up of PostgreSQL)
// of their own, and statements may be named prepared statements.
import {
  AbortedTransactionError,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type Transaction,
  type TransactionSettings,
} from 'kysely';
import net from 'node:net';
import pg from 'pg';
import type { Database } from './schema.js';

/**
 * A pg client on a socket of our own (pg's `stream` option), so that the driver can cork it: the
 * queries written for one round trip (a BEGIN and the first statement, the last statement and the
 * COMMIT) then leave in one write, and PostgreSQL wakes once for them. In pipeline mode pg writes
 * each query as it is given, and PostgreSQL, woken by the first, answers it and often sleeps again
 * before the second arrives (uncorked, a request with an Idempotency-Key woke its backends 0.7
 * times more than with pg's internals; corked, as often: BENCHMARKS.md).
 * Over TLS pg writes through a TLS socket of its own and corking ours changes nothing.
 */
export class CorkableClient extends pg.Client {
  readonly socket: net.Socket;

  constructor(config: pg.ClientConfig = {}) {
    // pg's own default stream is this very socket (lib/stream.js).
    const socket = new net.Socket();
    super({ ...config, stream: () => socket });
    this.socket = socket;
  }
}

/**
 * The dialect for a pool made with `pipeline: true`; `prepared` runs parameterised queries as named
 * prepared statements (false behind a pooler in transaction mode).
 */
export function pipelinedPostgresDialect(pool: pg.Pool, prepared: boolean): Dialect {
  const driver = new PipelinedPostgresDriver(pool, prepared);
  return {
    createDriver: () => driver,
    createQueryCompiler: () => new PostgresQueryCompiler(),
    createAdapter: () => new PostgresAdapter(),
    createIntrospector: (db) => new PostgresIntrospector(db),
  };
}

/** Statements runAtCommit marked to travel with their transaction's COMMIT. */
const atCommit = new WeakSet<CompiledQuery>();

/**
 * Runs `query` (a builder, or a statement of fixed text already compiled) as the transaction's
 * last statement: on PostgreSQL it is held back and sent with the COMMIT, in one round trip, so its
 * result is not returned and its error fails the commit (the transaction then rolls back, and
 * `transact` rejects with that error). On the embedded database it runs at once. Nothing may run in
 * the transaction after it (a statement that does sends it first); several held this way are sent
 * in the order they were held.
 * The compiled query is recognised by identity: were Kysely ever to hand the driver a copy, the
 * statement would simply run at once, one round trip more.
 */
export async function runAtCommit(trx: Transaction<Database>, query: CompiledQuery | { compile(trx: Transaction<Database>): CompiledQuery }): Promise<void> {
  const compiled = 'compile' in query ? query.compile(trx) : query;
  atCommit.add(compiled);
  await trx.executeQuery(compiled);
}

/** A read held back by readWithNext: held (waiting for the next statement), then answered. */
interface HeldRead {
  held: boolean;
  sent: boolean;
  resolve(rows: unknown[]): void;
  reject(reason: unknown): void;
}
const heldReads = new WeakMap<CompiledQuery, HeldRead>();

/** The rows of a read started by readWithNext. */
export interface ReadWithNext<R> {
  /** It ran at once (the embedded database, or behind a statement runAtCommit holds): rows() sends nothing. */
  ranAtOnce: boolean;
  /** Its rows; when nothing has sent it yet, it is sent now (with whatever else is held back). */
  rows(): Promise<R[]>;
}

/**
 * Starts `compiled` (a read) in the transaction: on PostgreSQL it is held back and sent with the
 * transaction's next statement (or its BEGIN's first), in the same round trip, and its rows arrive
 * with that statement's answer; anything the transaction runs later sees the database as that read
 * did, or later. On the embedded database, or behind a statement runAtCommit holds, it runs at once.
 */
export async function readWithNext<R>(trx: Transaction<Database>, compiled: CompiledQuery): Promise<ReadWithNext<R>> {
  let read!: HeldRead;
  const answered = new Promise<R[]>((resolve, reject) => {
    read = { held: false, sent: false, resolve: resolve as (rows: unknown[]) => void, reject };
  });
  // Read only through rows(): a transaction that fails first leaves it unread.
  answered.catch(() => {});
  heldReads.set(compiled, read);
  const result = await trx.executeQuery<R>(compiled);
  if (!read.held) read.resolve(result.rows);
  return {
    ranAtOnce: !read.held,
    rows: async () => {
      if (read.held && !read.sent) await trx.executeQuery(compiled);
      return answered;
    },
  };
}

const statementNames = new Map<string, string>();
const MAX_STATEMENTS = 1_000;
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;

/**
 * The name of the prepared statement for `text`: PostgreSQL parses and plans each distinct SQL text
 * once per connection instead of on every call. The texts are bounded (Kysely compiles a few shapes
 * per operation, values are always parameters); past MAX_STATEMENTS new texts run unnamed.
 */
function statementName(text: string, values: readonly unknown[]): string | undefined {
  if (values.length === 0 || !PREPARABLE.test(text)) return undefined;
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_STATEMENTS) {
    name = `sf_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * What differs from Kysely's own PostgresDriver: statements may be named prepared statements, and a
 * transaction costs no round trip of its own (PipelinedConnection).
 */
class PipelinedPostgresDriver implements Driver {
  readonly #connections = new WeakMap<pg.PoolClient, PipelinedConnection>();
  #pool: pg.Pool | undefined;

  constructor(
    pool: pg.Pool,
    private readonly prepared: boolean,
  ) {
    this.#pool = pool;
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    if (!this.#pool) throw new Error('the database has been closed');
    const client = await this.#pool.connect();
    let connection = this.#connections.get(client);
    if (!connection) {
      connection = new PipelinedConnection(client, this.prepared);
      this.#connections.set(client, connection);
    }
    return connection;
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let text = 'begin';
    if (settings.isolationLevel || settings.accessMode) {
      text = ['start transaction', settings.isolationLevel && `isolation level ${settings.isolationLevel}`, settings.accessMode].filter(Boolean).join(' ');
    }
    (connection as PipelinedConnection).begin(text);
    return Promise.resolve();
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PipelinedConnection).commit();
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PipelinedConnection).rollback();
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as PipelinedConnection).release();
    return Promise.resolve();
  }

  async destroy(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.end();
  }
}

/**
 * One pooled pg client in pipeline mode. A transaction's BEGIN is held back until its first
 * statement and written just before it, and the statements marked by runAtCommit are held back
 * until the COMMIT (or the next statement) and written just before it, so each group is answered
 * in one round trip; a transaction with no statement sends nothing. Each query still has its own
 * answer: the first error of a group is the one reported (PostgreSQL answers the rest of an aborted transaction with
 * 25P02, and its COMMIT with ROLLBACK).
 */
class PipelinedConnection implements DatabaseConnection {
  /** The BEGIN not sent yet. */
  #begin: string | undefined;
  /** The statements waiting for the COMMIT (or the next statement), in order. */
  #held: CompiledQuery[] = [];
  /** Reads waiting for the next statement (readWithNext), sent before it. */
  #reads: Array<{ compiled: CompiledQuery; read: HeldRead }> = [];
  /** A transaction is open on the server (its BEGIN sent, no COMMIT or ROLLBACK since). */
  #open = false;
  /** A COMMIT or ROLLBACK failed: the transaction's state is unknown, so the pool must not hand the connection out again. */
  #discard = false;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly prepared: boolean,
  ) {}

  begin(text: string): void {
    [this.#begin, this.#held] = [text, []];
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const read = heldReads.get(compiled);
    if (read?.held) {
      // Its rows asked for before anything sent it.
      if (!read.sent) await this.#send(undefined);
      return { rows: [] };
    }
    if (read && (this.#begin !== undefined || this.#open) && this.#held.length === 0) {
      read.held = true;
      this.#reads.push({ compiled, read });
      return { rows: [] };
    }
    if ((this.#begin !== undefined || this.#open) && atCommit.has(compiled)) {
      this.#held.push(compiled);
      return { rows: [] };
    }
    const results = await this.#send(compiled);
    return resultOf<R>(results[results.length - 1]);
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming query results is not supported');
  }

  async commit(): Promise<void> {
    if (this.#begin !== undefined && this.#held.length === 0) {
      this.#begin = undefined;
      this.#dropReads();
      return;
    }
    const results = await this.#send(undefined, 'commit');
    // PostgreSQL completes COMMIT with ROLLBACK when an earlier error (one the caller caught and
    // went on) left the transaction aborted.
    if (results[results.length - 1]?.command === 'ROLLBACK') throw new AbortedTransactionError();
  }

  async rollback(): Promise<void> {
    this.#held = [];
    this.#dropReads();
    if (this.#begin !== undefined) {
      this.#begin = undefined;
      return;
    }
    if (!this.#open) return;
    await this.#send(undefined, 'rollback');
  }

  release(): void {
    this.#dropReads();
    const discard = this.#discard || this.#open;
    [this.#begin, this.#held, this.#open] = [undefined, [], false];
    // pg's pool drops a client whose connection broke by itself.
    this.client.release(discard);
  }

  /**
   * Writes, without waiting in between, whatever is held back, then `compiled`, then `end`; resolves
   * with all their results once all are answered, or rejects with the first error.
   */
  async #send(compiled: CompiledQuery | undefined, end?: 'commit' | 'rollback'): Promise<pg.QueryResult[]> {
    const sent: Array<Promise<pg.QueryResult>> = [];
    const reads = this.#reads;
    this.#reads = [];
    let readsAt = 0;
    // pg writes a pipelined query while `query` runs: corked, they all leave in one write.
    const socket = this.client instanceof CorkableClient ? this.client.socket : undefined;
    socket?.cork();
    try {
      if (this.#begin !== undefined) {
        sent.push(this.client.query(this.#begin));
        [this.#begin, this.#open] = [undefined, true];
      }
      readsAt = sent.length;
      for (const { compiled: held } of reads) sent.push(this.#query(held));
      for (const held of this.#held) sent.push(this.#query(held));
      this.#held = [];
      if (compiled) sent.push(this.#query(compiled));
      if (end) {
        sent.push(this.client.query(end));
        this.#open = false;
      }
    } catch (err) {
      for (const { read } of reads) [read.sent, read.held] = [true, true];
      for (const { read } of reads) read.reject(err);
      throw err;
    } finally {
      socket?.uncork();
    }
    const settled = await Promise.allSettled(sent);
    // Each held read gets its own answer.
    reads.forEach(({ read }, i) => {
      const outcome = settled[readsAt + i]!;
      read.sent = true;
      if (outcome.status === 'fulfilled') read.resolve(resultOf(outcome.value).rows);
      else read.reject(outcome.reason);
    });
    const failed = settled.find((outcome) => outcome.status === 'rejected');
    if (failed) {
      if (end && settled[settled.length - 1]!.status === 'rejected') this.#discard = true;
      throw failed.reason;
    }
    return settled.map((outcome) => (outcome as PromiseFulfilledResult<pg.QueryResult>).value);
  }

  /** Held reads the transaction ended without sending: they fail, none is left waiting. */
  #dropReads(): void {
    for (const { read } of this.#reads.splice(0)) {
      read.sent = true;
      read.reject(new Error('the transaction ended before the read was sent'));
    }
  }

  #query(compiled: CompiledQuery): Promise<pg.QueryResult> {
    const values = [...compiled.parameters];
    const name = this.prepared ? statementName(compiled.sql, values) : undefined;
    return name === undefined ? this.client.query(compiled.sql, values) : this.client.query({ name, text: compiled.sql, values });
  }
}

/** A pg result as Kysely expects it (as Kysely's own PostgresConnection makes it). */
function resultOf<R>(result: pg.QueryResult | undefined): QueryResult<R> {
  if (!result || Array.isArray(result)) return { rows: [] };
  const { command, rowCount, rows } = result;
  const affects = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
  return { rows: (rows ?? []) as R[], ...(affects && { numAffectedRows: BigInt(rowCount ?? 0) }) };
}
