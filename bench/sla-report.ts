// npm run bench:sla-report: GET /reports/response-times's statement (sla/report.ts responseTimes) over
// a workspace of 100,000 threads and 1,000,000 messages (over its 2 channels, 4 stages and 20 agents),
// with the metric rows their clocks would have written (per thread one first response, four next
// responses and, when closed, one resolution), seeded directly in SQL over a year on a throw-away
// database, then migrated (migration 0032 builds the rollups of the days that ended). Reports p50/p95
// of each report shape against the 300 ms target, after one call that builds what the migration did
// not (today, if a day ended since), and the load average.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { sql } from 'kysely';
import pg from 'pg';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createWorkspace } from '../src/db/workspaces.js';
import { DEFAULT_STAGES } from '../src/provisioning.js';
import { responseTimes, type GroupBy } from '../src/sla/report.js';

const THREADS = Number(process.env.THREADS || 100_000);
const MESSAGES_PER_THREAD = 10;
const RUNS = Number(process.env.RUNS || 30);
const adminUrl = process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';

// BENCH_DB: measure a database seeded before (kept with BENCH_KEEP=1) instead of seeding one.
const reuse = process.env.BENCH_DB;
const name = reuse ?? `sf_bench_sla_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
if (!reuse) await admin.query(`create database ${name}`);
const url = new URL(adminUrl);
url.pathname = `/${name}`;
const db = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://', poolSize: 4 });

/** 100,000 threads, 1,000,000 messages and the metric rows of their clocks, in set-based statements; the workspace's id. */
async function seed(): Promise<string> {
  const { workspaceId, channels } = await createWorkspace(db, 'bench', DEFAULT_STAGES);
  const channelIds = channels.map((c) => c.id);
  const stageIds = (await db.selectFrom('stages').select('id').where('workspace_id', '=', workspaceId).orderBy('position').execute()).map((s) => s.id);
  const t = Date.now();
  await sql`insert into contacts (workspace_id, id, name, phone, created_at, updated_at)
            select ${workspaceId}::uuid, gen_random_uuid(), 'Contato ' || n, '+55119' || lpad(n::text, 8, '0'), now(), now()
              from generate_series(1, ${THREADS}) n`.execute(db);
  await sql`insert into threads (workspace_id, id, contact_id, channel_id, stage_id, stage_entered_at, status, closed_at, last_message_at, created_at, updated_at)
            select c.workspace_id, gen_random_uuid(), c.id, (${channelIds}::uuid[])[1 + c.n % ${channelIds.length}],
                   (${stageIds}::uuid[])[1 + c.n % ${stageIds.length}], x.ts,
                   case when n % 10 = 0 then 'open' else 'closed' end, case when n % 10 = 0 then null else x.ts + interval '2 hours' end, x.ts, x.ts, x.ts
              from (select id, workspace_id, row_number() over () as n from contacts where workspace_id = ${workspaceId}) c
             cross join lateral (select now() - (c.n % 365) * interval '1 day' - (c.n % 1440) * interval '1 minute' as ts) x`.execute(db);
  await sql`insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, created_at)
            select t.workspace_id, gen_random_uuid(), t.id, t.contact_id, t.channel_id,
                   case when m % 2 = 0 then 'inbound' else 'outbound' end, 'Mensagem ' || m, 'delivered', t.created_at + m * interval '5 minutes'
              from threads t cross join generate_series(0, ${MESSAGES_PER_THREAD - 1}) m
             where t.workspace_id = ${workspaceId}`.execute(db);
  await sql`insert into sla_metrics (workspace_id, id, thread_id, metric, channel_id, stage_id, agent_id, by_ai, started_at, happened_at,
                                     seconds, business_seconds, policy_id, due_at, within_sla)
            select t.workspace_id, gen_random_uuid(), t.id, k.metric, t.channel_id, t.stage_id,
                   case when h % 20 = 0 then null else ('00000000-0000-7000-8000-' || lpad((h % 20)::text, 12, '0'))::uuid end,
                   case when k.metric = 'firstResponse' then h % 3 = 0 end,
                   t.created_at, t.created_at + d.secs * interval '1 second', d.secs, d.secs * 0.6, null,
                   t.created_at + interval '15 minutes', d.secs <= 900
              from threads t
             cross join lateral (select abs(hashtext(t.id::text)) as h) hh
             cross join lateral (values ('firstResponse', 0), ('nextResponse', 1), ('nextResponse', 2), ('nextResponse', 3), ('nextResponse', 4), ('resolution', 5)) k (metric, i)
             cross join lateral (select ((h >> k.i) % 3600 + 1)::float8 * case when k.metric = 'resolution' then 3 else 1 end as secs) d
             where t.workspace_id = ${workspaceId} and (k.metric <> 'resolution' or t.status = 'closed')`.execute(db);
  await sql`vacuum analyze sla_metrics`.execute(db);
  await sql`analyze threads`.execute(db);
  await sql`analyze messages`.execute(db);
  const seedMs = Date.now() - t;
  const counts = (
    await sql<{ threads: number; messages: number; metrics: number }>`
      select (select count(*) from threads)::int as threads, (select count(*) from messages)::int as messages, (select count(*) from sla_metrics)::int as metrics`.execute(
      db,
    )
  ).rows[0]!;
  console.log(JSON.stringify({ seeded: counts, seedSeconds: Math.round(seedMs / 1000) }));
  return workspaceId;
}

try {
  await migrateToLatest(db);
  const seeded = reuse ? await db.selectFrom('workspaces').select('id').executeTakeFirst() : undefined;
  const workspaceId = seeded?.id ?? (await seed());
  const now = Date.now();

  const TARGET_MS = 300;
  const shapes: Array<{ label: string; days: number; groupBy?: GroupBy; businessHours?: boolean }> = [];
  for (const days of [30, 366]) {
    for (const groupBy of [undefined, 'agent', 'channel', 'stage', 'day'] as const) {
      for (const businessHours of [false, true])
        shapes.push({ label: `${days} days, ${groupBy ? `by ${groupBy}` : 'total'}${businessHours ? ', business hours' : ''}`, days, groupBy, businessHours });
    }
  }
  // The first report builds the rollups of every day that ended and is not built yet (the whole year here:
  // the rows were seeded after the migration; on a deployed database migration 0032 built them).
  const first = performance.now();
  await responseTimes(db, workspaceId, { from: new Date(now - 86_400_000).toISOString(), to: new Date(now).toISOString() }, { businessHours: false });
  console.log(JSON.stringify({ firstReportBuildsRollupsMs: Math.round(performance.now() - first), loadAverage: os.loadavg()[0]!.toFixed(2) }));
  const results: Array<{ shape: string; p95: number }> = [];
  for (const shape of shapes) {
    // The window ends now (its last part day is read from the metric rows) and starts mid-day.
    const window = { from: new Date(now - shape.days * 86_400_000 + 1_000).toISOString(), to: new Date(now).toISOString() };
    const times: number[] = [];
    let count = 0;
    let ai = 0;
    for (let i = 0; i < RUNS + 2; i++) {
      const t = performance.now();
      const report = await responseTimes(db, workspaceId, window, { groupBy: shape.groupBy, businessHours: shape.businessHours ?? false });
      if (i >= 2) times.push(performance.now() - t);
      count = report.total.firstResponse.count + report.total.nextResponse.count + report.total.resolution.count;
      ai = report.total.firstResponse.byAi;
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]!);
    results.push({ shape: shape.label, p95: at(0.95) });
    console.log(
      JSON.stringify({
        shape: shape.label,
        metricRows: count,
        byAi: ai,
        p50Ms: at(0.5),
        p95Ms: at(0.95),
        maxMs: Math.round(times.at(-1)!),
        targetP95Ms: TARGET_MS,
        met: at(0.95) <= TARGET_MS,
        loadAverage: os.loadavg()[0]!.toFixed(2),
      }),
    );
  }
  // The histograms' precision: the same windows read exactly (every metric row, percentile_cont's arithmetic).
  for (const groupBy of [undefined, 'agent'] as const) {
    const window = { from: new Date(now - 366 * 86_400_000 + 1_000).toISOString(), to: new Date(now).toISOString() };
    const read = (exactUpTo: number) => responseTimes(db, workspaceId, window, { groupBy, businessHours: false, exactUpTo });
    const [fast, exact] = [await read(0), await read(Number.MAX_SAFE_INTEGER)];
    let worst = 0;
    const pairs = [[fast.total, exact.total], ...fast.data.map((g, i) => [g, exact.data[i]!])] as const;
    for (const [a, b] of pairs) {
      for (const metric of ['firstResponse', 'nextResponse', 'resolution'] as const) {
        for (const p of ['p50Seconds', 'p90Seconds'] as const) {
          const [x, y] = [a[metric][p], b[metric][p]];
          if (x !== null && y !== null && y > 0) worst = Math.max(worst, Math.abs(x - y) / y);
        }
        if (a[metric].count !== b[metric].count || a[metric].meanSeconds !== b[metric].meanSeconds) worst = Infinity;
      }
    }
    console.log(JSON.stringify({ precision: `366 days, ${groupBy ? `by ${groupBy}` : 'total'}`, worstPercentileErrorPercent: +(worst * 100).toFixed(3) }));
  }
  const missed = results.filter((r) => r.p95 > TARGET_MS);
  console.log(JSON.stringify({ shapes: results.length, met: results.length - missed.length, missed: missed.map((r) => r.shape) }));
} finally {
  await db.destroy();
  if (process.env.BENCH_KEEP === '1') console.log(JSON.stringify({ kept: name }));
  else await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
