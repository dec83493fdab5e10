// npm run bench: seeds a fresh PostgreSQL database in bulk, starts the baseline and the service
// (production mode, real PostgreSQL and Redis), and measures the scenarios of BENCHMARKS.md,
// interleaved and repeated, then (f) one worker against two, info against warn logs, and CPU
// profiles. Prints the tables and writes them to bench/results/runs/ (bench/results/ with BENCH_KEEP=1). Stops by itself; every child
// process and the database go away at the end, also on failure or Ctrl-C.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import pg from 'pg';
import { connectClient } from './lib/pg-client.js';
import { listAgents } from '../src/db/agents.js';
import { funnelCounts } from '../src/db/funnel.js';
import { countNpsGroups } from '../src/db/nps-groups.js';
import { countNpsAnswers, listThreads } from '../src/db/threads.js';
import { instantToIso, parseInstant } from '../src/time.js';
import { explainCall, plansTable, type QueryPlan } from './lib/explain.js';
import { cores, groupCpuMs, loadAverage, machineCpuMs, pidsCpuMs, readProcStat } from './lib/cpu.js';
import { findWrk, makeWorkDir, runLoad, stopLoads, type LoadResult, type LoadSpec } from './lib/load.js';
import { freePort, sleep, startProcess, stopAll, stopProcess, waitReady, type Started } from './lib/processes.js';
import { resultsDir } from './lib/results-dir.js';
import { fmt, resultsTable, summarise, targetsTable, type CpuUse, type Run, type ScenarioInfo, type TargetCheck } from './lib/report.js';
import { profileMarkdown, summariseProfile, type CpuProfile, type ProfileSummary } from './profile.js';
import { allVisiblePercent, dropDatabase, FULL_SHAPE, seed, type Fixture } from './seed.js';

const instant = (text: string): bigint => parseInstant(text)!;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Where the tables go (lib/results-dir.ts: ignored by git unless BENCH_KEEP=1). */
const RESULTS = resultsDir();

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

const settings = {
  adminUrl: process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres',
  redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  durationS: envNumber('BENCH_DURATION_S', 10),
  warmupS: envNumber('BENCH_WARMUP_S', 2),
  rounds: envNumber('BENCH_ROUNDS', 3),
  connections: envNumber('BENCH_CONNECTIONS', 50),
  fixedRate: envNumber('BENCH_FIXED_RATE', 1000),
  /** Threads per workspace as a share of the full 100,000 (for a quick check of the harness). */
  scale: envNumber('BENCH_SCALE', 1),
  maxMinutes: envNumber('BENCH_MAX_MINUTES', 30),
};

const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '_').toLowerCase();
const dbName = `sf_bench_${stamp}`;
const workDir = makeWorkDir();
const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), `sf-bench-profiles-${stamp}-`));
const log = (line: string): void => void process.stdout.write(`${line}\n`);

// ---------------------------------------------------------------------------------------------
// Servers

interface Server {
  name: string;
  started: Started;
  url: string;
}

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  // Only what the child needs: the caller's own LOG_LEVEL, KEY_CACHE_TTL_MS, ... must not leak in.
  const { PATH, HOME, TMPDIR, LANG } = process.env;
  return { PATH, HOME, TMPDIR, LANG, ...extra };
}

async function startBaseline(fixture: Fixture): Promise<Server> {
  const port = await freePort();
  const started = startProcess(
    process.execPath,
    ['--import', 'tsx', 'bench/baseline.ts'],
    childEnv({ PORT: String(port), DATABASE_URL: fixture.databaseUrl, BENCH_WORKSPACE_ID: fixture.workspaceId, NODE_ENV: 'production' }),
    ROOT,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(`${url}/healthz`, started);
  return { name: 'baseline', started, url };
}

async function startService(name: string, fixture: Fixture, env: Record<string, string> = {}, preload: string[] = []): Promise<Server> {
  const port = await freePort();
  const started = startProcess(
    process.execPath,
    ['--import', 'tsx', ...preload.flatMap((p) => ['--import', p]), 'src/server.ts'],
    childEnv({
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: fixture.databaseUrl,
      REDIS_URL: settings.redisUrl,
      REDIS_PREFIX: `sfbench:${stamp}:`,
      ...env,
    }),
    ROOT,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(`${url}/readyz`, started);
  return { name, started, url };
}

// ---------------------------------------------------------------------------------------------
// CPU accounting around a load run

interface Watch {
  admin: pg.Client;
  redisPid: number | undefined;
}

/** CPU ms so far of each PostgreSQL process that works for the bench: its backends and the server's own. */
async function postgresCpu(admin: pg.Client): Promise<{ backends: Map<number, number>; background: Map<number, number> }> {
  const { rows } = await admin.query<{ pid: number; backend: boolean }>(
    `select pid, backend_type = 'client backend' as backend from pg_stat_activity
      where pid <> pg_backend_pid() and (datname = $1 or backend_type <> 'client backend')`,
    [dbName],
  );
  const read = (pids: number[]) => new Map(pids.map((pid) => [pid, readProcStat(pid)?.cpuMs ?? 0]));
  return { backends: read(rows.filter((r) => r.backend).map((r) => r.pid)), background: read(rows.filter((r) => !r.backend).map((r) => r.pid)) };
}

/** CPU used between two readings by the processes of the second (a process new since the first counts from 0). */
function cpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += Math.max(0, ms - (before.get(pid) ?? 0));
  return total;
}

async function measured(watch: Watch, server: Server, spec: LoadSpec): Promise<{ result: LoadResult; cpuMs: CpuUse; loadAverage: number }> {
  // Warm-up: JIT, connection pools, key cache.
  await runLoad({ ...spec, rate: undefined, durationS: settings.warmupS }, workDir);
  const group = server.started.child.pid!;
  const before = {
    server: groupCpuMs(group),
    pg: await postgresCpu(watch.admin),
    redis: watch.redisPid ? pidsCpuMs([watch.redisPid]) : 0,
    machine: machineCpuMs(),
  };
  const result = await runLoad(spec, workDir);
  const machine = machineCpuMs();
  const pgAfter = await postgresCpu(watch.admin);
  const cpu = {
    server: groupCpuMs(group) - before.server,
    pgBackends: cpuDelta(before.pg.backends, pgAfter.backends),
    pgBackground: cpuDelta(before.pg.background, pgAfter.background),
    redis: (watch.redisPid ? pidsCpuMs([watch.redisPid]) : 0) - before.redis,
    loadgen: result.loadgenCpuMs,
    machineBusy: machine.busy - before.machine.busy,
    machineTotal: machine.total - before.machine.total,
  };
  const ours = cpu.server + cpu.pgBackends + cpu.pgBackground + cpu.redis + cpu.loadgen;
  return { result, cpuMs: { ...cpu, others: Math.max(0, cpu.machineBusy - ours) }, loadAverage: loadAverage() };
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Scenario extends ScenarioInfo {
  server: () => Server;
  spec: () => LoadSpec;
}

function npsPath(fixture: Fixture, days: number): string {
  const to = new Date();
  const from = new Date(to.getTime() - days * 86_400_000);
  const query = new URLSearchParams({ workspaceId: fixture.workspaceId, dateFrom: from.toISOString(), dateTo: to.toISOString() });
  return `/v1/threads/stats/nps?${query.toString()}`;
}

const bearer = (key: string): Record<string, string> => ({ Authorization: `Bearer ${key}` });

// ---------------------------------------------------------------------------------------------
// The hot queries, explained

const daysAgo = (days: number): { from: string; to: string } => {
  const to = new Date();
  return { from: new Date(to.getTime() - days * 86_400_000).toISOString(), to: to.toISOString() };
};

/** The last `days` days as the funnel's handler passes them: ISO 8601 UTC with microseconds. */
const window = (days: number): { from: string; to: string } => {
  const { from, to } = daysAgo(days);
  return { from: instantToIso(instant(from)), to: instantToIso(instant(to)) };
};

/** The plans of one request's statements (labels `x #1`, `x #2`, ...), their execution times summed. */
const requestMs = (plans: QueryPlan[], label: string): number =>
  plans.filter((p) => p.label === label || p.label.startsWith(`${label} #`)).reduce((sum, p) => sum + p.executionMs, 0);

async function explainHotQueries(fixture: Fixture, when: string): Promise<Array<QueryPlan & { when: string }>> {
  const ws = fixture.workspaceId;
  const plans = [
    ...(await explainCall(fixture.databaseUrl, '(b) agents page', (db) => listAgents(db, ws, {}, 1, 20))),
    ...(await explainCall(fixture.databaseUrl, '(c) open threads page', (db) => listThreads(db, ws, { status: 'open' }, 1, 20))),
    ...(await explainCall(fixture.databaseUrl, '(e) NPS 30 days', (db) => countNpsAnswers(db, ws, instant(daysAgo(30).from), instant(daysAgo(30).to)))),
    ...(await explainCall(fixture.databaseUrl, '(e) NPS 365 days', (db) => countNpsAnswers(db, ws, instant(daysAgo(365).from), instant(daysAgo(365).to)))),
    // GET /threads/stats/funnel: one statement. The 30-day window is the target; the others show how it scales.
    ...(await explainCall(fixture.databaseUrl, '(g) funnel 30 days', (db) => funnelCounts(db, ws, window(30).from, window(30).to))),
    ...(await explainCall(fixture.databaseUrl, '(g) funnel 7 days', (db) => funnelCounts(db, ws, window(7).from, window(7).to))),
    ...(await explainCall(fixture.databaseUrl, '(g) funnel 365 days', (db) => funnelCounts(db, ws, window(365).from, window(365).to))),
    // GET /threads/stats/nps?groupBy=day over a year: the totals, then the groups.
    ...(await explainCall(fixture.databaseUrl, '(h) NPS by day 365 days', async (db) => {
      const { from, to } = daysAgo(365);
      await countNpsAnswers(db, ws, instant(from), instant(to));
      await countNpsGroups(db, ws, instant(from), instant(to), 'day');
    })),
  ];
  for (const p of plans) {
    log(`  EXPLAIN ${p.label} (${when}): ${p.nodes.join(' → ')}; ${p.rowsScanned} rows scanned, heap fetches ${p.heapFetches}, ${p.executionMs.toFixed(3)} ms`);
  }
  return plans.map((p) => ({ ...p, when }));
}

/** The (e) windows span whole UTC days: those come from nps_daily, the two edge days from threads_nps_idx. */
const npsPlanOk = (p: QueryPlan): boolean =>
  p.nodes.includes('Index Only Scan on threads_nps_idx') && p.nodes.some((n) => n.endsWith(' on nps_daily_pkey') || n.endsWith(' on nps_daily')) && !p.seqScan;

/** The measured workspace's stage entries (moves and openings) in the last `days` days: what the funnel reads. */
async function countRecentMoves(fixture: Fixture, days: number): Promise<number> {
  const client = await connectClient(fixture.databaseUrl);
  try {
    const { rows } = await client.query<{ n: number }>(
      `select count(*)::int as n from thread_history where workspace_id = $1 and field = 'stageId' and created_at >= now() - $2 * interval '1 day'`,
      [fixture.workspaceId, days],
    );
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}

/** VACUUM (ANALYZE) of the written tables (as autovacuum would); returns its seconds and the share of all-visible thread pages after it. */
async function vacuum(fixture: Fixture): Promise<{ seconds: number; allVisiblePercent: number }> {
  const client = await connectClient(fixture.databaseUrl);
  const started = performance.now();
  try {
    await client.query('vacuum (analyze) threads');
    await client.query('vacuum (analyze) messages');
    await client.query('vacuum (analyze) thread_history');
    return { seconds: (performance.now() - started) / 1000, allVisiblePercent: await allVisiblePercent(client, 'threads') };
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Profiles

async function waitForFile(file: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${file}`);
    await sleep(50);
  }
}

async function profileRun(
  name: string,
  fixture: Fixture,
  env: Record<string, string>,
  spec: (server: Server) => LoadSpec,
): Promise<{ summary: ProfileSummary; result: LoadResult; file: string }> {
  const file = path.join(profileDir, `${name}.cpuprofile`);
  const server = await startService(`profile ${name}`, fixture, { ...env, BENCH_CPU_PROFILE: file }, ['./bench/cpu-profile-hook.ts']);
  try {
    const load = spec(server);
    await runLoad({ ...load, durationS: settings.warmupS }, workDir);
    const pid = server.started.child.pid!;
    process.kill(pid, 'SIGUSR2');
    await waitForFile(`${file}.started`, 10_000);
    const cpuBefore = groupCpuMs(pid);
    const result = await runLoad(load, workDir);
    const cpuMs = groupCpuMs(pid) - cpuBefore;
    process.kill(pid, 'SIGUSR2');
    await waitForFile(file, 30_000);
    const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
    return { summary: summariseProfile(profile, { requests: result.requests, cpuMs }), result, file };
  } finally {
    await stopProcess(server.started.child);
  }
}

// ---------------------------------------------------------------------------------------------

const line = (scenario: string, round: number | string, r: LoadResult): string =>
  `  [${round}] ${scenario.padEnd(34)} ${fmt.n0(r.rps).padStart(7)} req/s  p50 ${fmt.n1(r.p50Ms).padStart(6)} ms  p99 ${fmt.n1(r.p99Ms).padStart(6)} ms` +
  `${r.non2xx + r.socketErrors ? `  ERRORS ${r.non2xx} non-2xx, ${r.socketErrors} socket` : ''}  (${r.tool})`;

async function main(): Promise<void> {
  const startedAt = Date.now();
  const wrk = findWrk();
  // wrk --version prints its version and exits 1.
  const wrkVersion = wrk ? /wrk \S+/.exec(spawnSync(wrk, ['--version'], { encoding: 'utf8' }).stdout)?.[0] : undefined;
  log(`Support Funnel API bench ${stamp}: ${cores()} cores, load average ${loadAverage()}, node ${process.version}`);
  log(
    `Load generator: ${wrk ? `${wrkVersion} (1 thread) for throughput runs` : 'autocannon (wrk not found)'}; bench/paced-run.ts (open loop, evenly spaced) for the fixed-rate run.`,
  );
  log(`Rounds ${settings.rounds} x ${settings.durationS} s per run (+${settings.warmupS} s warm-up), ${settings.connections} connections.`);

  const admin = await connectClient(settings.adminUrl);
  const redis = new Redis(settings.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const redisPid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]) || undefined;
  await redis.quit();
  const pgSettings = Object.fromEntries(
    (
      await admin.query<{ name: string; setting: string }>(
        `select name, setting from pg_settings where name in ('server_version', 'autovacuum', 'shared_buffers', 'max_connections', 'synchronous_commit', 'jit')`,
      )
    ).rows.map((r) => [r.name, r.setting]),
  );
  const watch: Watch = { admin, redisPid: redisPid && fs.existsSync(`/proc/${redisPid}`) ? redisPid : undefined };

  // Seed
  log(`\nSeeding ${dbName} ...`);
  const shape = { ...FULL_SHAPE, threadsPerWorkspace: Math.round(FULL_SHAPE.threadsPerWorkspace * settings.scale) };
  const fixture = await seed(settings.adminUrl, dbName, shape, log);
  log(
    `  ${Object.entries(fixture.counts)
      .map(([k, v]) => `${k} ${v.toLocaleString('en-US')}`)
      .join(', ')} in ${fixture.timings.total!.toFixed(1)} s`,
  );
  log(
    `  steps: ${Object.entries(fixture.timings)
      .filter(([k]) => k !== 'total')
      .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
      .join(', ')}`,
  );

  const movesAfterSeed = await countRecentMoves(fixture, 30);
  const plansAfterSeed = await explainHotQueries(fixture, 'after the seed');

  // Servers for the interleaved rounds
  log('\nStarting the baseline and the service ...');
  const baseline = await startBaseline(fixture);
  const service = await startService('service', fixture);
  // The limiter variant: pro keys (Redis counter per request) with a 100 ms window, cycled so no
  // key comes near its 300 per window; the Redis work per request is the production one.
  const limited = await startService('service (pro keys, limiter on)', fixture, { RATE_LIMIT_WINDOW_MS: '100' });

  const c = settings.connections;
  const d = settings.durationS;
  const key = bearer(fixture.enterpriseKey);
  const content = 'Olá! Seu pedido foi enviado e chega amanhã.';
  // New contacts (no phone, so none clash); with a key, a fresh one per request: every request does
  // the key's work (lock, lookup, store) and none is a cheaper replay. Without a key the requests
  // are the same but for the header's name (one the service ignores), so the load generator does
  // the same work for both (bench/idempotency.ts measures this alone).
  const contactsSpec = (withKey: boolean): LoadSpec => ({
    url: `${service.url}/v1/contacts`,
    method: 'POST',
    headers: { ...key, 'Content-Type': 'application/json' },
    variants: Array.from({ length: Math.max(1_000, 4_000 * d) }, (_, i) => ({
      body: JSON.stringify({ name: `Cliente ${i}` }),
      headers: { [withKey ? 'Idempotency-Key' : 'X-Bench-Nonce']: randomUUID() },
    })),
    connections: c,
    durationS: d,
  });
  const scenarios: Scenario[] = [
    {
      id: 'a',
      title: '(a) baseline: bare Express + pg, GET /v1/agents',
      server: () => baseline,
      spec: () => ({ url: `${baseline.url}/v1/agents`, connections: c, durationS: d }),
    },
    {
      id: 'b',
      title: '(b) service GET /v1/agents',
      ratioTo: 'a',
      server: () => service,
      spec: () => ({ url: `${service.url}/v1/agents`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'b-limited',
      title: '(b) with the Redis limiter (pro keys)',
      ratioTo: 'a',
      server: () => limited,
      spec: () => ({ url: `${limited.url}/v1/agents`, variants: fixture.proKeys.map((k) => ({ headers: bearer(k) })), connections: c, durationS: d }),
    },
    {
      // The control for the next one: what a bare Express + pg server's tail is on this machine.
      id: 'a-fixed',
      title: `(a) baseline at a fixed ${settings.fixedRate} req/s`,
      server: () => baseline,
      spec: () => ({ url: `${baseline.url}/v1/agents`, connections: c, durationS: d, rate: settings.fixedRate }),
    },
    {
      id: 'b-fixed',
      title: `(b) at a fixed ${settings.fixedRate} req/s`,
      server: () => service,
      spec: () => ({ url: `${service.url}/v1/agents`, headers: key, connections: c, durationS: d, rate: settings.fixedRate }),
    },
    {
      id: 'c',
      title: '(c) GET /v1/threads?status=open',
      ratioTo: 'a',
      server: () => service,
      spec: () => ({ url: `${service.url}/v1/threads?status=open`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'd',
      title: '(d) POST /v1/messages (2,000 open threads)',
      ratioTo: 'a',
      server: () => service,
      spec: () => ({
        url: `${service.url}/v1/messages`,
        method: 'POST',
        headers: { ...key, 'Content-Type': 'application/json' },
        variants: fixture.pairs.map((p) => ({ body: JSON.stringify({ contactId: p.contactId, channelId: p.channelId, content }) })),
        connections: c,
        durationS: d,
      }),
    },
    { id: 'g', title: '(g) POST /v1/contacts', ratioTo: 'a', server: () => service, spec: () => contactsSpec(false) },
    { id: 'g-key', title: '(g) POST /v1/contacts, Idempotency-Key', ratioTo: 'g', server: () => service, spec: () => contactsSpec(true) },
    {
      id: 'e30',
      title: '(e) NPS over 30 days',
      ratioTo: 'a',
      server: () => service,
      spec: () => ({ url: `${service.url}${npsPath(fixture, 30)}`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'e365',
      title: '(e) NPS over a year',
      ratioTo: 'a',
      server: () => service,
      spec: () => ({ url: `${service.url}${npsPath(fixture, 365)}`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'e30-1',
      title: '(e) NPS over 30 days, 1 connection',
      server: () => service,
      spec: () => ({ url: `${service.url}${npsPath(fixture, 30)}`, headers: key, connections: 1, durationS: Math.max(3, d / 2) }),
    },
    {
      id: 'e365-1',
      title: '(e) NPS over a year, 1 connection',
      server: () => service,
      spec: () => ({ url: `${service.url}${npsPath(fixture, 365)}`, headers: key, connections: 1, durationS: Math.max(3, d / 2) }),
    },
  ];

  const runs: Run[] = [];
  const vacuums: Array<{ seconds: number; allVisiblePercent: number }> = [];
  for (let round = 1; round <= settings.rounds; round++) {
    log(`\nRound ${round}/${settings.rounds}`);
    // Rotated each round so no scenario always runs first or after the writes of (d).
    const order = scenarios.map((_, i) => scenarios[(i + round - 1) % scenarios.length]!);
    for (const scenario of order) {
      const m = await measured(watch, scenario.server(), scenario.spec());
      runs.push({ scenario: scenario.id, round, ...m });
      log(line(scenario.title, round, m.result));
    }
    // The machine's PostgreSQL runs without autovacuum: do its work between rounds.
    vacuums.push(await vacuum(fixture));
  }
  await stopProcess(limited.started.child);

  // (f) two workers against one, interleaved
  log('\n(f) WEB_CONCURRENCY=2 against 1 on (b)');
  const twoWorkers = await startService('service, 2 workers', fixture, { WEB_CONCURRENCY: '2' });
  const fScenarios: Scenario[] = [
    {
      id: 'f1',
      title: '(f) GET /v1/agents, 1 worker',
      server: () => service,
      spec: () => ({ url: `${service.url}/v1/agents`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'f2',
      title: '(f) GET /v1/agents, 2 workers',
      ratioTo: 'f1',
      server: () => twoWorkers,
      spec: () => ({ url: `${twoWorkers.url}/v1/agents`, headers: key, connections: c, durationS: d }),
    },
  ];
  for (let round = 1; round <= settings.rounds; round++) {
    const order = round % 2 ? fScenarios : [...fScenarios].reverse();
    for (const scenario of order) {
      const m = await measured(watch, scenario.server(), scenario.spec());
      runs.push({ scenario: scenario.id, round, ...m });
      log(line(scenario.title, round, m.result));
    }
  }
  await stopProcess(twoWorkers.started.child);

  // (i) PATCH /v1/threads/{id}, after the interleaved rounds: its moves would otherwise change what
  // the other scenarios read (the open threads' rows and index entries) between two vacuums.
  log('\n(i) PATCH /v1/threads/{id}, 3 runs');
  const patchScenario: Scenario = {
    // Each PATCH moves one of the 2,000 open threads to another stage (a real change: the thread
    // row, a history row and three index entries); a full cycle of the variants goes to stage 2,
    // the next to stage 3, so no request repeats the current value.
    id: 'i',
    title: '(i) PATCH /v1/threads/{id} (stage moves)',
    ratioTo: 'a',
    server: () => service,
    spec: () => ({
      url: `${service.url}/v1/threads`,
      method: 'PATCH',
      headers: { ...key, 'Content-Type': 'application/json' },
      variants: [fixture.stageIds[1]!, fixture.stageIds[2]!].flatMap((stageId) =>
        fixture.openThreadIds.map((id) => ({ path: `/v1/threads/${id}`, body: JSON.stringify({ stageId }) })),
      ),
      connections: c,
      durationS: d,
    }),
  };
  for (let round = 1; round <= settings.rounds; round++) {
    const m = await measured(watch, patchScenario.server(), patchScenario.spec());
    runs.push({ scenario: patchScenario.id, round, ...m });
    log(line(patchScenario.title, round, m.result));
  }
  vacuums.push(await vacuum(fixture));
  const movesInWindow = await countRecentMoves(fixture, 30);

  // Logging: info (one line per request) against warn, once
  log('\nLOG_LEVEL=info against warn on (b), once (logs to /dev/null)');
  const infoLogs = await startService('service, LOG_LEVEL=info', fixture, { LOG_LEVEL: 'info' });
  const logScenarios: Scenario[] = [
    {
      id: 'log-warn',
      title: '(b) LOG_LEVEL=warn',
      server: () => service,
      spec: () => ({ url: `${service.url}/v1/agents`, headers: key, connections: c, durationS: d }),
    },
    {
      id: 'log-info',
      title: '(b) LOG_LEVEL=info',
      ratioTo: 'log-warn',
      server: () => infoLogs,
      spec: () => ({ url: `${infoLogs.url}/v1/agents`, headers: key, connections: c, durationS: d }),
    },
  ];
  for (const scenario of logScenarios) {
    const m = await measured(watch, scenario.server(), scenario.spec());
    runs.push({ scenario: scenario.id, round: 1, ...m });
    log(line(scenario.title, 1, m.result));
  }
  await stopProcess(infoLogs.started.child);
  await stopProcess(service.started.child);
  await stopProcess(baseline.started.child);

  // CPU profiles of (b), with and without the limiter, and of (d)
  log('\nCPU profiles under load');
  const profileB = await profileRun('b', fixture, {}, (server) => ({ url: `${server.url}/v1/agents`, headers: key, connections: c, durationS: d }));
  log(line('(b) while profiled', 'p', profileB.result));
  const profileLimited = await profileRun('b-limited', fixture, { RATE_LIMIT_WINDOW_MS: '100' }, (server) => ({
    url: `${server.url}/v1/agents`,
    variants: fixture.proKeys.map((k) => ({ headers: bearer(k) })),
    connections: c,
    durationS: d,
  }));
  log(line('(b) with limiter while profiled', 'p', profileLimited.result));
  const profileD = await profileRun('d', fixture, {}, (server) => ({ ...scenarios.find((x) => x.id === 'd')!.spec(), url: `${server.url}/v1/messages` }));
  log(line('(d) while profiled', 'p', profileD.result));

  const plansAtEnd = await explainHotQueries(fixture, 'at the end');

  // Summaries
  const allInfo: ScenarioInfo[] = [...scenarios, patchScenario, ...fScenarios, ...logScenarios];
  const summaries = allInfo.map((info) => summarise(runs, info)).filter((s) => s !== undefined);
  const byId = (id: string) => summaries.find((s) => s.id === id);
  const b = byId('b');
  const checks: TargetCheck[] = [
    {
      target: '(b) >= 0.9x (a) at 50 connections (aim > 1.0x)',
      measured: `${fmt.n2(b?.ratio)}x (rounds: ${b?.ratioPerRound?.map((r) => r.toFixed(2)).join(', ')})`,
      met: b?.ratio !== undefined ? b.ratio >= 0.9 : undefined,
    },
    {
      target: `(b) p99 < 15 ms at a fixed ${settings.fixedRate} req/s`,
      measured: `${fmt.n1(byId('b-fixed')?.p99Ms)} ms (achieved ${fmt.n0(byId('b-fixed')?.rps ?? NaN)} req/s; the baseline (a) at the same rate: ${fmt.n1(byId('a-fixed')?.p99Ms)} ms)`,
      met: (byId('b-fixed')?.p99Ms ?? Infinity) < 15,
    },
    { target: '(d) >= 1,200 req/s', measured: `${fmt.n0(byId('d')?.rps ?? NaN)} req/s`, met: (byId('d')?.rps ?? 0) >= 1200 },
    ...[30, 365].map((days) => {
      const s = byId(`e${days}-1`);
      return {
        target: `(e) ${days} d: median < 3 ms end to end (1 connection)`,
        measured: `${fmt.n2(s?.p50Ms)} ms (p99 ${fmt.n2(s?.p99Ms)} ms)`,
        met: (s?.p50Ms ?? Infinity) < 3,
      };
    }),
    ...plansAtEnd
      .filter((p) => p.label.startsWith('(e)'))
      .map((p) => ({
        target: `${p.label}: query < 1 ms, whole days from nps_daily, edge days by Index Only Scan on threads_nps_idx, no Seq Scan`,
        measured: `${p.executionMs.toFixed(3)} ms; ${p.nodes.join(' → ')}; ${p.rowsScanned.toLocaleString('en-US')} rows scanned (days and index entries), heap fetches ${p.heapFetches}`,
        met: p.executionMs < 1 && npsPlanOk(p),
      })),
    {
      target: '(g) POST /v1/contacts with an Idempotency-Key >= 0.85x without one',
      measured: `${fmt.n2(byId('g-key')?.ratio)}x (${fmt.n0(byId('g-key')?.rps ?? NaN)} against ${fmt.n0(byId('g')?.rps ?? NaN)} req/s)`,
      met: byId('g-key')?.ratio !== undefined ? byId('g-key')!.ratio! >= 0.85 : undefined,
    },
    { target: '(f) WEB_CONCURRENCY=2 against 1: report the ratio', measured: `${fmt.n2(byId('f2')?.ratio)}x`, met: undefined },
    {
      target: '(i) PATCH /v1/threads/{id} >= 1,000 req/s',
      measured: `${fmt.n0(byId('i')?.rps ?? NaN)} req/s (p99 ${fmt.n1(byId('i')?.p99Ms)} ms)`,
      met: (byId('i')?.rps ?? 0) >= 1000,
    },
    ...(
      [
        ['(g) funnel 30 days', 10],
        ['(h) NPS by day 365 days', 5],
      ] as const
    ).flatMap(([label, limit]) =>
      (
        [
          ['after the seed', plansAfterSeed, movesAfterSeed],
          ['at the end', plansAtEnd, movesInWindow],
        ] as const
      ).map(([when, plans, moves]) => {
        const ms = requestMs(plans, label);
        const nodes = plans.filter((p) => p.label === label || p.label.startsWith(`${label} #`)).flatMap((p) => p.nodes);
        const entries = label.startsWith('(g)') ? ` (${moves.toLocaleString('en-US')} stage entries in the workspace's last 30 days)` : '';
        return {
          target: `${label} (${when}): <= ${limit} ms in PostgreSQL, no Seq Scan of a big table`,
          measured: `${ms.toFixed(3)} ms${entries}; ${[...new Set(nodes)].join(', ')}`,
          // The workspace's few stages may be read whole: a Seq Scan of stages is one page.
          met: ms <= limit && !nodes.some((n) => n.includes('Seq Scan') && !n.endsWith(' on stages')),
        };
      }),
    ),
  ];

  const totalMinutes = (Date.now() - startedAt) / 60_000;
  const markdown = [
    `### Bench ${stamp}`,
    '',
    `${cores()} cores, node ${process.version}, PostgreSQL ${pgSettings.server_version} (autovacuum ${pgSettings.autovacuum}, shared_buffers ${pgSettings.shared_buffers} x 8 kB), ` +
      `load generator ${wrk ? wrkVersion : 'autocannon'} (fixed rate: bench/paced-run.ts); ${settings.rounds} rounds of ${settings.durationS} s per run after ${settings.warmupS} s of warm-up; ` +
      `medians over rounds. Whole bench ${totalMinutes.toFixed(1)} min. Load average at the end ${loadAverage()}.`,
    '',
    `Seed: ${Object.entries(fixture.counts)
      .map(([k, v]) => `${k} ${v.toLocaleString('en-US')}`)
      .join(', ')} in ${fixture.timings.total!.toFixed(1)} s ` +
      `(${Object.entries(fixture.timings)
        .filter(([k]) => k !== 'total')
        .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
        .join(', ')}). ` +
      `Threads' pages all-visible after the seed: ${fixture.allVisiblePercent}%. ` +
      `VACUUM (ANALYZE) of threads and messages after each round (autovacuum ${pgSettings.autovacuum}): ${vacuums.map((v) => `${v.seconds.toFixed(1)} s (${v.allVisiblePercent}% all-visible)`).join(', ')}.`,
    '',
    resultsTable(summaries, cores()),
    '',
    'CPU µs/req: CPU time of each process over the run divided by the requests served (PostgreSQL: the backends of the bench database plus its background processes; ' +
      'load gen: wrk, autocannon or the paced generator). Ceiling: the req/s at which these alone would fill every core. ' +
      "Other users' CPU: the machine's busy time used by none of them, as a share of all cores (other work on the machine: the noise). " +
      'Errors: non-2xx responses plus socket errors and timeouts, over all rounds.',
    '',
    targetsTable(checks),
    '',
    'The hot queries as the service sends them (captured from src/db through Kysely), EXPLAIN (ANALYZE, BUFFERS, TIMING OFF), median of 5:',
    '',
    plansTable([...plansAfterSeed, ...plansAtEnd]),
    '',
    profileMarkdown(profileB.summary, `CPU profile of (b), enterprise key (limiter skipped): ${fmt.n0(profileB.result.rps)} req/s while profiled`),
    profileMarkdown(profileLimited.summary, `CPU profile of (b) with the Redis limiter (pro keys): ${fmt.n0(profileLimited.result.rps)} req/s while profiled`),
    profileMarkdown(profileD.summary, `CPU profile of (d) POST /v1/messages: ${fmt.n0(profileD.result.rps)} req/s while profiled`),
    `Profiles: \`${profileB.file}\`, \`${profileLimited.file}\`, \`${profileD.file}\` (open in Chrome DevTools or speedscope).`,
    '',
  ].join('\n');

  fs.mkdirSync(RESULTS, { recursive: true });
  const json = {
    stamp,
    settings,
    machine: { cores: cores(), node: process.version, loadgen: wrk ? wrkVersion : 'autocannon', postgres: pgSettings, minutes: totalMinutes },
    seed: { counts: fixture.counts, allVisiblePercent: fixture.allVisiblePercent, timings: fixture.timings },
    plans: { afterSeed: plansAfterSeed, atEnd: plansAtEnd },
    vacuumSeconds: vacuums,
    summaries,
    checks,
    profiles: { b: profileB.summary, bLimited: profileLimited.summary, d: profileD.summary },
    runs,
  };
  for (const name of [stamp, 'latest']) {
    fs.writeFileSync(path.join(RESULTS, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
    fs.writeFileSync(path.join(RESULTS, `${name}.md`), markdown);
  }
  log(`\n${markdown}`);
  const shown = path.relative(ROOT, RESULTS).startsWith('..') ? RESULTS : path.relative(ROOT, RESULTS);
  log(`Results: ${shown}/${stamp}.md and .json (also latest.md, latest.json). Whole bench ${totalMinutes.toFixed(1)} min.`);
  await admin.end();
}

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    stopLoads();
    await stopAll();
    await dropDatabase(settings.adminUrl, dbName).catch((err: unknown) => {
      process.stderr.write(`could not drop ${dbName}: ${err instanceof Error ? err.message : String(err)}\n`);
    });
    fs.rmSync(workDir, { recursive: true, force: true });
    // Profiles stay for a look in DevTools; a run that ended before profiling leaves nothing.
    if (fs.readdirSync(profileDir).length === 0) fs.rmdirSync(profileDir);
  })();
  return cleaning;
}

const watchdog = setTimeout(() => {
  process.stderr.write(`bench: still running after ${settings.maxMinutes} minutes; stopping\n`);
  void cleanup().finally(() => process.exit(1));
}, settings.maxMinutes * 60_000);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`bench: ${signal}; stopping children and dropping ${dbName}\n`);
    void cleanup().finally(() => process.exit(130));
  });
}

try {
  await main();
  await cleanup();
  clearTimeout(watchdog);
} catch (err) {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await cleanup();
  clearTimeout(watchdog);
  process.exit(1);
}
