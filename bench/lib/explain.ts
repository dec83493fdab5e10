// The hot queries exactly as the service sends them (captured from its own src/db functions through
// Kysely's log), explained with EXPLAIN (ANALYZE, BUFFERS, TIMING OFF): TIMING OFF leaves out the
// per-row clock reads that would inflate a scan of tens of thousands of rows.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { connectClient } from './pg-client.js';
import type { Db } from '../../src/db/database.js';
import type { Database } from '../../src/db/schema.js';
import { median } from './report.js';

/** A node of EXPLAIN's JSON plan, the fields read here. */
interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Heap Fetches'?: number;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}
interface ExplainRun {
  Plan: PlanNode;
  'Execution Time': number;
  'Planning Time': number;
}

export interface QueryPlan {
  label: string;
  sql: string;
  /** Plan nodes top-down, e.g. `Index Only Scan on threads_nps_idx`. */
  nodes: string[];
  seqScan: boolean;
  heapFetches: number;
  /** Rows the scans read (sum over scan nodes, a bitmap index and heap scan pair once). */
  rowsScanned: number;
  executionMs: number;
  planningMs: number;
  buffers: { hit: number; read: number };
}

/** Runs `call` against the database with a logging Kysely and returns the statements it sent. */
async function capture(databaseUrl: string, call: (db: Db) => Promise<unknown>): Promise<Array<{ sql: string; parameters: readonly unknown[] }>> {
  const captured: Array<{ sql: string; parameters: readonly unknown[] }> = [];
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  pool.on('error', () => {});
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (event.level === 'query') captured.push({ sql: event.query.sql, parameters: event.query.parameters });
    },
  });
  try {
    await call(db);
  } finally {
    await db.destroy();
  }
  return captured;
}

function describe(node: PlanNode): string {
  const on = node['Index Name'] ?? node['Relation Name'];
  return on ? `${node['Node Type']} on ${on}` : node['Node Type'];
}

/** EXPLAINs (5 times; median times) every statement `call` sends; for reads only. */
export async function explainCall(databaseUrl: string, label: string, call: (db: Db) => Promise<unknown>): Promise<QueryPlan[]> {
  const statements = await capture(databaseUrl, call);
  const client = await connectClient(databaseUrl);
  try {
    const plans: QueryPlan[] = [];
    for (const [i, { sql, parameters }] of statements.entries()) {
      const runs: ExplainRun[] = [];
      for (let n = 0; n < 5; n++) {
        const { rows } = await client.query(`explain (analyze, buffers, timing off, format json) ${sql}`, parameters as unknown[]);
        runs.push((rows[0] as { 'QUERY PLAN': [ExplainRun] })['QUERY PLAN'][0]);
      }
      const last = runs[runs.length - 1]!;
      const nodes: string[] = [];
      let heapFetches = 0;
      let rowsScanned = 0;
      const walk = (node: PlanNode): void => {
        nodes.push(describe(node));
        heapFetches += node['Heap Fetches'] ?? 0;
        // A Bitmap Index Scan's rows are read again by its Bitmap Heap Scan: count them once.
        if (/Scan/.test(node['Node Type']) && node['Node Type'] !== 'Bitmap Index Scan')
          rowsScanned += (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1);
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(last.Plan);
      plans.push({
        label: statements.length > 1 ? `${label} #${i + 1}` : label,
        sql: sql.replace(/\s+/g, ' ').trim(),
        nodes,
        seqScan: nodes.some((n) => /Seq Scan/.test(n)),
        heapFetches,
        rowsScanned,
        executionMs: median(runs.map((r) => r['Execution Time'])),
        planningMs: median(runs.map((r) => r['Planning Time'])),
        buffers: { hit: last.Plan['Shared Hit Blocks'] ?? 0, read: last.Plan['Shared Read Blocks'] ?? 0 },
      });
    }
    return plans;
  } finally {
    await client.end();
  }
}

export function plansTable(plans: Array<QueryPlan & { when: string }>): string {
  return [
    '| query | when | plan (top-down) | rows scanned | heap fetches | buffers hit/read | execution ms | planning ms |',
    '|---|---|---|---:|---:|---:|---:|---:|',
    ...plans.map(
      (p) =>
        `| ${p.label} | ${p.when} | ${p.nodes.join(' → ')} | ${p.rowsScanned.toLocaleString('en-US')} | ${p.heapFetches} | ` +
        `${p.buffers.hit}/${p.buffers.read} | ${p.executionMs.toFixed(3)} | ${p.planningMs.toFixed(3)} |`,
    ),
  ].join('\n');
}
