// npm run bench:start: how long the service takes from its command to listening, migrations already
// applied, on PostgreSQL (production mode) and on the embedded database: the build as the README's
// production command runs it (`node dist/src/server.js`; run `npm run build` first) and, for
// comparison, the TypeScript sources through tsx (`node --import tsx src/server.ts`), alternating,
// BENCH_ROUNDS (5) times each, with each start's CPU time (user + system: what load on a shared
// machine stretches least) and, since some of the validator's work waits for the first request of
// each operation, the time until a first GET /v1/agents is answered 200. Target: the build listening
// in under 3 s (median). Writes bench/results/runs/start-<stamp>.md (bench/results/ with BENCH_KEEP=1,
// or BENCH_RESULTS_DIR).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { freePort, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, log, redisUrl, ROOT, stamp, writeReport } from './lib/service-bench.js';

const rounds = Number(process.env.BENCH_ROUNDS || 5);
type Way = 'build' | 'sources';
const ARGS: Record<Way, string[]> = { build: ['dist/src/server.js'], sources: ['--import', 'tsx', 'src/server.ts'] };

/** The status of GET `url`, waiting as long as it takes (the first request compiles what it needs); 0 when it failed. */
function getStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { headers, timeout: 60_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

/**
 * Starts the service one way, waits for its 'listening' line, then for a first GET /v1/agents answered
 * 200 (with `apiKey`, or the embedded database's demo key from its banner), stops it; the wall and CPU
 * milliseconds to listening, and the wall milliseconds to that first answer.
 */
async function timeStart(way: Way, env: NodeJS.ProcessEnv, apiKey?: string): Promise<{ wallMs: number; cpuMs: number; firstMs: number }> {
  const port = await freePort();
  const started = Date.now();
  const { child, output } = startProcess(
    process.execPath,
    ARGS[way],
    { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    ROOT,
    true,
  );
  const deadline = started + 120_000;
  while (!output().includes('"msg":"listening"')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${way}: did not listen:\n${output()}`);
    await sleep(5);
  }
  const wallMs = Date.now() - started;
  const cpuMs = groupCpuMs(child.pid!);
  let key = apiKey;
  while (key === undefined) {
    key = /Demo key:\s+(\S+)/.exec(output())?.[1];
    if (key === undefined && Date.now() > deadline) throw new Error(`${way}: no demo key in:\n${output()}`);
    if (key === undefined) await sleep(5);
  }
  const status = await getStatus(`http://127.0.0.1:${port}/v1/agents`, { authorization: `Bearer ${key}` });
  if (status !== 200) throw new Error(`${way}: GET /v1/agents answered ${status}:\n${output()}`);
  const firstMs = Date.now() - started;
  await stopProcess(child);
  return { wallMs, cpuMs, firstMs };
}

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'server.js'))) throw new Error('no build: run `npm run build` first');
  const { databaseUrl, db, drop } = await benchDatabase('start', 1);
  const pglite = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-bench-start-'));
  const lines: string[] = [];
  const results: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  const first: Record<string, number[]> = {};
  try {
    await migrateToLatest(db);
    const { apiKey } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench start' });
    const keys: Record<string, string | undefined> = { postgresql: apiKey, embedded: undefined };
    const setups: Record<string, NodeJS.ProcessEnv> = {
      postgresql: { NODE_ENV: 'production', DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, SECRETS_KEY: randomBytes(32).toString('base64') },
      embedded: { DATABASE_URL: '', REDIS_URL: '', PGLITE_DIR: path.join(pglite, 'pglite'), MEDIA_STORE: `file:${path.join(pglite, 'media')}` },
    };
    // A first start of each migrates (and on the embedded database creates the demo workspace): not measured.
    for (const [setup, env] of Object.entries(setups)) await timeStart('build', env, keys[setup]);
    for (let round = 1; round <= rounds; round++) {
      for (const [setup, env] of Object.entries(setups)) {
        const ways: Way[] = round % 2 ? ['build', 'sources'] : ['sources', 'build'];
        for (const way of ways) {
          const { wallMs, cpuMs, firstMs } = await timeStart(way, env, keys[setup]);
          (results[`${way} ${setup}`] ??= []).push(wallMs);
          (cpu[`${way} ${setup}`] ??= []).push(cpuMs);
          (first[`${way} ${setup}`] ??= []).push(firstMs);
          const line = `round ${round}, ${setup}, ${way === 'build' ? 'node dist/src/server.js' : 'node --import tsx src/server.ts'}: ${(wallMs / 1000).toFixed(2)} s to listening, CPU ${(cpuMs / 1000).toFixed(2)} s, first GET /v1/agents answered at ${(firstMs / 1000).toFixed(2)} s (load average ${loadAverage().toFixed(1)})`;
          lines.push(line);
          log(line);
        }
      }
    }
  } finally {
    await stopAll();
    await drop();
    fs.rmSync(pglite, { recursive: true, force: true });
  }
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
  const table = [
    '| start, migrations applied | to listening, median | each | CPU to listening, median | first GET /v1/agents answered, median | target | |',
    '|---|---|---|---|---|---|---|',
    ...Object.entries(results).map(([key, values]) => {
      const target = key.startsWith('build') ? '< 3 s to listening' : '';
      const verdict = key.startsWith('build') ? (median(values) < 3_000 ? 'met' : 'missed') : '';
      return `| ${key} | ${s(median(values))} | ${values.map((v) => (v / 1000).toFixed(2)).join(', ')} | ${s(median(cpu[key]!))} | ${s(median(first[key]!))} | ${target} | ${verdict} |`;
    }),
  ].join('\n');
  log(`\n${table}`);
  writeReport(
    'start',
    `# Start bench ${stamp}\n\n${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}\n\n${lines.map((l) => `- ${l}`).join('\n')}\n\n${table}\n`,
  );
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:start failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
