// What the benches of the service as shipped (channels, webhooks, AI agents) share: their settings,
// a throw-away PostgreSQL database of their own, a kept-alive HTTP client, percentiles, and where
// their results are written.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDatabase, type Db } from '../../src/db/database.js';
import { freePort, httpStatus, sleep, startProcess, type Started } from './processes.js';
import { resultsDir } from './results-dir.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const adminUrl = process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
export const redisUrl = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
export const durationS = Number(process.env.BENCH_DURATION_S || 10);
export const scale = Number(process.env.BENCH_SCALE || 1);
/** This run's stamp, e.g. 20261123_150412: in result file names, database names and Redis prefixes. */
export const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '_');
export const log = (line: string): void => void process.stdout.write(`${line}\n`);

export const pct = (values: number[], p: number): number => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};
export const ms = (n: number): string => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : '–');

export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** Sends `body` (JSON text) on a kept-alive connection; status 0 when the request failed. */
export function post(url: string, body: string, headers: Record<string, string>, method = 'POST'): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end(body);
  });
}

/** Closed loop: `connections` requests in flight for `seconds`; the rate of 2xx answers and the count of the others. */
export async function fullSpeed(
  seconds: number,
  connections: number,
  next: () => { url: string; body: string; headers: Record<string, string> },
): Promise<{ rps: number; done: number; errors: number }> {
  const end = Date.now() + seconds * 1000;
  let done = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        const r = next();
        const answer = await post(r.url, r.body, r.headers);
        if (answer.status >= 200 && answer.status < 300) done++;
        else errors++;
      }
    }),
  );
  return { rps: done / seconds, done, errors };
}

export interface BenchDatabase {
  databaseUrl: string;
  db: Db;
  /** Closes the bench's pool and drops the database. */
  drop: () => Promise<void>;
}

/** A fresh database `sf_bench_<name>_<stamp>` on the admin server, with a pool of `poolSize` for the bench. */
export async function benchDatabase(name: string, poolSize: number): Promise<BenchDatabase> {
  const dbName = `sf_bench_${name}_${stamp.toLowerCase()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  const db = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize });
  return {
    databaseUrl,
    db,
    async drop() {
      await db.destroy();
      await admin.query(`drop database if exists ${dbName} with (force)`);
      await admin.end();
    },
  };
}

/** Writes a bench's markdown report as `<name>-<stamp>.md` in the results directory (lib/results-dir.ts); its path. */
export function writeReport(name: string, text: string): string {
  const dir = resultsDir();
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}-${stamp}.md`);
  fs.writeFileSync(file, text);
  log(`written to ${path.relative(ROOT, file)}`);
  return file;
}

export interface BenchService extends Started {
  /** http://127.0.0.1:<port> */
  base: string;
}

/**
 * Starts the service as shipped (production mode, warn logs, src/server.ts under tsx) on a free
 * loopback port with `env` over this process's environment (DATABASE_URL and the like), Redis at
 * redisUrl under a prefix of its own, and waits until /healthz answers 200. From this checkout, or
 * from the checkout at `root` (which has its node_modules).
 */
export async function startBenchService(name: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = [], root = ROOT): Promise<BenchService> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const started = startProcess(
    process.execPath,
    ['--import', 'tsx', ...nodeArgs, 'src/server.ts'],
    {
      ...process.env,
      NODE_ENV: 'production',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `sf-bench-${name}:${stamp}:`,
      ...env,
    },
    root,
    true,
  );
  const deadline = Date.now() + 120_000;
  while ((await httpStatus(`${base}/healthz`)) !== 200) {
    if (Date.now() > deadline) throw new Error(`the service did not start:\n${started.output()}`);
    await sleep(200);
  }
  return { ...started, base };
}

/**
 * Runs `load` under the service's CPU profiler (the service started with
 * `--import ./bench/cpu-profile-hook.ts` and BENCH_CPU_PROFILE=`output`), and moves the profile of
 * that window alone to `to` (bench/profile.ts reads it).
 */
export async function profiledWindow<T>(pid: number, output: string, to: string, load: () => Promise<T>): Promise<T> {
  fs.rmSync(output, { force: true });
  fs.rmSync(`${output}.started`, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 100 && !fs.existsSync(`${output}.started`); i++) await sleep(50);
  const result = await load();
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 300 && !fs.existsSync(output); i++) await sleep(100);
  if (to !== output) fs.renameSync(output, to);
  return result;
}
