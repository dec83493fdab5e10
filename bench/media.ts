// npm run bench:media: files through the service as shipped (production mode, its own fresh
// PostgreSQL database, Redis, MEDIA_STORE in a temp directory). (1) One BENCH_MEDIA_DOC_MB (100)
// MB document uploaded (streamed from this process, never held whole) and downloaded, with the
// service's RSS sampled every 50 ms: the rise over its RSS before (target < 64 MB: files stream,
// nothing buffers them). (2) BENCH_MEDIA_UPLOADS (20) concurrent 5 MB uploads while another client
// sends GET /v1/me: that request's p50 / p99 during the uploads against before
// them (target: p99 under 100 ms, the uploads do not starve other requests), over BENCH_MEDIA_ROUNDS
// (5) rounds, GET /me sent every 10 ms whatever the answers do. Prints a table and
// writes bench/results/runs/media-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { loadAverage } from './lib/cpu.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, log, ms, pct, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const MB = 2 ** 20;
const docMb = Number(process.env.BENCH_MEDIA_DOC_MB || 100);
const uploads = Number(process.env.BENCH_MEDIA_UPLOADS || 20);
const uploadMb = Number(process.env.BENCH_MEDIA_UPLOAD_MB || 5);
const rounds = Number(process.env.BENCH_MEDIA_ROUNDS || 5);

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** Uploads `bytes` bytes of `type` in 1 MiB chunks (one random chunk, written again and again). */
function upload(base: string, key: string, type: string, bytes: number): Promise<{ status: number; body: string }> {
  const chunk = Buffer.alloc(MB, Math.floor(Math.random() * 256));
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}/v1/media?filename=bench.bin`,
      { method: 'POST', agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': type, 'content-length': bytes } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    let left = bytes;
    const write = (): void => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  });
}

/** Downloads a file and throws its bytes away; how many there were. */
function download(base: string, key: string, id: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}/v1/media/${id}`, { agent: false, headers: { authorization: `Bearer ${key}` } }, (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => (n += c.length));
        res.on('end', () => resolve(n));
      })
      .on('error', reject);
  });
}

function timedGet(base: string, key: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(`${base}/v1/me`, { headers: { authorization: `Bearer ${key}` } }, (res) => {
        res.resume();
        res.on('end', () => resolve(performance.now() - started));
      })
      .on('error', reject);
  });
}

/** The probe, run in a process of its own so that the uploads this process writes cannot delay it. */
const PROBE = `
const http = require('node:http');
const [base, key] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const pending = [];
const get = () => new Promise((resolve) => {
  const started = performance.now();
  http.get(base + '/v1/me', { agent, headers: { authorization: 'Bearer ' + key } }, (res) => {
    res.resume();
    res.on('end', () => resolve(performance.now() - started));
  }).on('error', () => resolve(NaN));
});
const timer = setInterval(() => pending.push(get()), 10);
process.stdin.resume();
process.stdin.on('end', async () => {
  clearInterval(timer);
  process.stdout.write(JSON.stringify(await Promise.all(pending)));
  process.exit(0);
});
`;

/**
 * GET /v1/me every 10 ms from another process, open loop (each sent on time whether or not the last
 * was answered, so a stalled service shows as slow answers, not as fewer requests), until `stop()`.
 */
function probe(base: string, key: string): { stop: () => Promise<number[]> } {
  const child = spawn(process.execPath, ['-e', PROBE, base, key], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      child.stdin.end();
      await exited;
      return (JSON.parse(out) as number[]).filter(Number.isFinite);
    },
  };
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('media', 4);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-bench-media-'));
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    const service = await startBenchService('media', { DATABASE_URL: databaseUrl, MEDIA_STORE: `file:${dir}`, REQUEST_TIMEOUT_MS: '600000' });
    const pid = service.child.pid!;
    await timedGet(service.base, key.apiKey);
    await sleep(1_000);

    // (1) one large document up and down, RSS sampled.
    const before = rssMb(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 50);
    const upStarted = performance.now();
    const created = await upload(service.base, key.apiKey, 'application/pdf', docMb * MB);
    const upMs = performance.now() - upStarted;
    if (created.status !== 201) throw new Error(`upload answered ${created.status}: ${created.body}`);
    const peakUp = peak;
    const { id } = JSON.parse(created.body) as { id: string };
    const downStarted = performance.now();
    const got = await download(service.base, key.apiKey, id);
    const downMs = performance.now() - downStarted;
    clearInterval(sampler);
    if (got !== docMb * MB) throw new Error(`downloaded ${got} bytes of ${docMb * MB}`);
    const rise = peak - before;

    // (2) concurrent uploads against other requests.
    const quiet = probe(service.base, key.apiKey);
    await sleep(3_000);
    const baseline = await quiet.stop();
    const busy = probe(service.base, key.apiKey);
    const batchStarted = performance.now();
    const answers: Array<{ status: number; body: string }> = [];
    for (let round = 0; round < rounds; round++) {
      answers.push(...(await Promise.all(Array.from({ length: uploads }, () => upload(service.base, key.apiKey, 'image/jpeg', uploadMb * MB)))));
    }
    const batchMs = (performance.now() - batchStarted) / rounds;
    const during = await busy.stop();
    const refused = answers.filter((a) => a.status !== 201);
    if (refused.length > 0) throw new Error(`${refused.length} uploads failed: ${refused[0]!.status} ${refused[0]!.body}`);
    await stopProcess(service.child);

    const machine = `${os.cpus().length} CPUs, load ${loadAverage()}, Node ${process.version}`;
    const rows = [
      [`${docMb} MB document: upload / download`, `${(upMs / 1000).toFixed(1)} s / ${(downMs / 1000).toFixed(1)} s`],
      ['service RSS before / peak up / peak down', `${before.toFixed(0)} / ${peakUp.toFixed(0)} / ${peak.toFixed(0)} MB`],
      ['RSS rise', `${rise.toFixed(1)} MB (target < 64 MB: ${rise < 64 ? 'met' : 'missed'})`],
      [`${uploads} concurrent ${uploadMb} MB uploads, ${rounds} rounds`, `all 201, ${(batchMs / 1000).toFixed(2)} s a round`],
      ['GET /me before: n, p50 / p99', `${baseline.length}, ${ms(pct(baseline, 50))} / ${ms(pct(baseline, 99))}`],
      [
        'GET /me during: n, p50 / p99',
        `${during.length}, ${ms(pct(during, 50))} / ${ms(pct(during, 99))} (target p99 < 100 ms: ${pct(during, 99) < 100 ? 'met' : 'missed'})`,
      ],
    ];
    for (const [what, value] of rows) log(`${what}: ${value}`);
    const table = ['| measure | value |', '|---|---|', ...rows.map(([a, b]) => `| ${a} | ${b} |`)].join('\n');
    writeReport('media', `# Media bench ${stamp}\n\n${machine}\n\n${table}\n`);
  } finally {
    await stopAll();
    await drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
