// What PostgreSQL wrote to its WAL between two positions: the bytes (anywhere), and, when this
// machine holds the server's WAL files and pg_waldump (a server on the same machine, read as a user
// who may read its data directory), the records by relation and kind. A count: the same on a busy
// machine as on a quiet one. Relations are named from the database the statements ran in.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';

/** The WAL's insert position now (an LSN, as text). */
export async function walPosition(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn');
  return rows[0]!.lsn;
}

/** The bytes of WAL between two positions. */
export async function walBytes(client: pg.Client, from: string, to: string): Promise<number> {
  const { rows } = await client.query<{ bytes: string }>('select pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::text as bytes', [from, to]);
  return Number(rows[0]!.bytes);
}

/** pg_waldump of the server's major version: BENCH_PG_WALDUMP, else Debian's and the PGDG packages' place. */
function findWaldump(major: number): string | undefined {
  const candidates = [process.env.BENCH_PG_WALDUMP, `/usr/lib/postgresql/${major}/bin/pg_waldump`, `/usr/pgsql-${major}/bin/pg_waldump`];
  return candidates.find((candidate): candidate is string => candidate !== undefined && fs.existsSync(candidate));
}

export interface WalRecords {
  relation: string;
  /** The resource manager and the record's kind, as pg_waldump names them: `Heap INSERT`, `Btree INSERT_LEAF`. */
  kind: string;
  records: number;
  bytes: number;
}

/**
 * The WAL records between two positions, summed by relation and kind, largest first; undefined
 * when pg_waldump or the WAL files cannot be read here (read them soon: a checkpoint recycles them).
 */
export async function walByRelation(client: pg.Client, from: string, to: string): Promise<WalRecords[] | undefined> {
  const { rows } = await client.query<{ major: number; directory: string }>(
    `select current_setting('server_version_num')::int / 10000 as major, current_setting('data_directory') as directory`,
  );
  const waldump = findWaldump(rows[0]!.major);
  const walDirectory = path.join(rows[0]!.directory, 'pg_wal');
  if (!waldump || !fs.existsSync(walDirectory)) return undefined;
  let dump: string;
  try {
    dump = execFileSync(waldump, ['-p', walDirectory, '-s', from, '-e', to], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
  const { rows: names } = await client.query<{ node: string; name: string }>(
    'select relfilenode::text as node, relname as name from pg_class where relfilenode <> 0',
  );
  const nameOf = new Map(names.map((r) => [r.node, r.name]));
  const sums = new Map<string, WalRecords>();
  for (const line of dump.split('\n')) {
    const record = /^rmgr: (\w+)\s+len \(rec\/tot\):\s*\d+\/\s*(\d+),.*desc: (\S+)/.exec(line);
    if (!record) continue;
    const node = /blkref #0: rel \d+\/\d+\/(\d+)/.exec(line)?.[1];
    const relation = node ? (nameOf.get(node) ?? node) : '-';
    const kind = `${record[1]} ${record[3]}`;
    const key = `${relation}\u0000${kind}`;
    const sum = sums.get(key) ?? { relation, kind, records: 0, bytes: 0 };
    sum.records++;
    sum.bytes += Number(record[2]);
    sums.set(key, sum);
  }
  return [...sums.values()].sort((a, b) => b.bytes - a.bytes);
}

/** The records summed by table, each index's with its table's (`tableOf`: index -> table, indexTables'). */
export function walByTable(records: readonly WalRecords[], tableOf: ReadonlyMap<string, string>): Array<{ table: string; records: number; bytes: number }> {
  const sums = new Map<string, { table: string; records: number; bytes: number }>();
  for (const r of records) {
    const table = tableOf.get(r.relation) ?? r.relation;
    const sum = sums.get(table) ?? { table, records: 0, bytes: 0 };
    sum.records += r.records;
    sum.bytes += r.bytes;
    sums.set(table, sum);
  }
  return [...sums.values()].sort((a, b) => b.bytes - a.bytes);
}

/** Each index of the database's public tables, mapped to its table. */
export async function indexTables(client: pg.Client): Promise<Map<string, string>> {
  const { rows } = await client.query<{ index: string; table: string }>(
    `select indexname as index, tablename as table from pg_indexes where schemaname = 'public'`,
  );
  return new Map(rows.map((r) => [r.index, r.table]));
}
