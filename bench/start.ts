// npm run bench:start: how long the service takes from its command to listening, migrations already
// applied, on PostgreSQL (production mode) and on the embedded database: the build as the README's
// production command runs it (`node dist/src/server.js`; run `npm run build` first) and, for
// comparison, the TypeScript sources through tsx (`node --import tsx src/server.ts`), alternating,
// BENCH_ROUNDS (5) times each, with each start's CPU time (user + system: what load on a shared
// machine does not stretch). Target: the build under 3 s. Writes bench/results/runs/start-<stamp>.md
// (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../src/db/migrate.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { freePort, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, log, redisUrl, ROOT, stamp, writeReport } from './lib/service-bench.js';

const rounds = Number(process.env.BENCH_ROUNDS || 5);
type Way = 'build' | 'sources';
const ARGS: Record<Way, string[]> = { build: ['dist/src/server.js'], sources: ['--import', 'tsx', 'src/server.ts'] };

/** Starts the service one way, waits for its 'listening' line, stops it; the wall and CPU milliseconds to listening. */
async function timeStart(way: Way, env: NodeJS.ProcessEnv): Promise<{ wallMs: number; cpuMs: number }> {
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
  await stopProcess(child);
  return { wallMs, cpuMs };
}

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'server.js'))) throw new Error('no build: run `npm run build` first');
  const { databaseUrl, db, drop } = await benchDatabase('start', 1);
  const pglite = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-bench-start-'));
  const lines: string[] = [];
  const results: Record<string, number[]> = {};
  try {
    await migrateToLatest(db);
    const setups: Record<string, NodeJS.ProcessEnv> = {
      postgresql: { NODE_ENV: 'production', DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, SECRETS_KEY: randomBytes(32).toString('base64') },
      embedded: { DATABASE_URL: '', REDIS_URL: '', PGLITE_DIR: path.join(pglite, 'pglite'), MEDIA_STORE: `file:${path.join(pglite, 'media')}` },
    };
    // A first start of each migrates (and on the embedded database creates the demo workspace): not measured.
    for (const env of Object.values(setups)) await timeStart('build', env);
    for (let round = 1; round <= rounds; round++) {
      for (const [setup, env] of Object.entries(setups)) {
        const ways: Way[] = round % 2 ? ['build', 'sources'] : ['sources', 'build'];
        for (const way of ways) {
          const { wallMs, cpuMs } = await timeStart(way, env);
          (results[`${way} ${setup}`] ??= []).push(wallMs);
          const line = `round ${round}, ${setup}, ${way === 'build' ? 'node dist/src/server.js' : 'node --import tsx src/server.ts'}: ${(wallMs / 1000).toFixed(2)} s to listening, CPU ${(cpuMs / 1000).toFixed(2)} s (load average ${loadAverage().toFixed(1)})`;
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
  const table = [
    '| start, migrations applied | median | each | target | |',
    '|---|---|---|---|---|',
    ...Object.entries(results).map(([key, values]) => {
      const target = key.startsWith('build') ? '< 3 s' : '';
      const verdict = key.startsWith('build') ? (median(values) < 3_000 ? 'met' : 'missed') : '';
      return `| ${key} | ${(median(values) / 1000).toFixed(2)} s | ${values.map((v) => (v / 1000).toFixed(2)).join(', ')} | ${target} | ${verdict} |`;
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
