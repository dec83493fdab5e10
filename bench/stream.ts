// npm run bench:stream: the live event stream (GET /v1/events/stream) against the service as shipped
// (production mode, its own fresh PostgreSQL database, Redis): BENCH_STREAMS concurrent streams
// (1,000) of one workspace on one instance, events committed at BENCH_STREAM_RATE a second (100,
// recordEvent from this process, one transaction each) for BENCH_STREAM_SECONDS (60). Measures commit
// (recordEvent resolved) -> frame read by each client: p50 / p99 over every (event, client) pair,
// and the service's RSS every 5 s. The clients run in this process and only look for each frame's
// `id:` line. Prints a table and writes bench/results/stream-<stamp>.md (or into BENCH_RESULTS_DIR).
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import { migrateToLatest } from '../src/db/migrate.js';
import { recordEvent } from '../src/events/record.js';
import { SYSTEM } from '../src/actor.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { loadAverage } from './lib/cpu.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, log, ms, pct, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const streams = Number(process.env.BENCH_STREAMS || 1_000);
const rate = Number(process.env.BENCH_STREAM_RATE || 100);
const seconds = Number(process.env.BENCH_STREAM_SECONDS || 60);

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** Opens a stream; calls `seen(id)` for each frame's id as it is read. */
function openStream(base: string, key: string, seen: (id: string) => void): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/v1/events/stream`, { headers: { authorization: `Bearer ${key}` }, agent: false }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      res.setEncoding('latin1');
      let tail = '\n'; // the first frame's id: line starts the body
      res.on('data', (chunk: string) => {
        const text = tail + chunk;
        let at = text.indexOf('\nid: ');
        let end = 0;
        while (at !== -1 && at + 41 <= text.length) {
          seen(text.slice(at + 5, at + 41));
          end = at + 41;
          at = text.indexOf('\nid: ', end);
        }
        tail = text.slice(Math.max(end, text.length - 41));
      });
      resolve(req);
    });
    req.on('error', reject);
  });
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('stream', 8);
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    const service = await startBenchService('stream', { DATABASE_URL: databaseUrl, MAX_CONNECTIONS: String(streams + 100) });
    const pid = service.child.pid!;
    const committedAt = new Map<string, number>();
    const latencies: number[] = [];
    let received = 0;
    const seen = (id: string): void => {
      const at = committedAt.get(id);
      received++;
      // A frame can be read before recordEvent's promise resolves: that is 0 ms.
      latencies.push(at === undefined ? 0 : Math.max(0, performance.now() - at));
    };
    const clients: http.ClientRequest[] = [];
    for (let i = 0; i < streams; i += 50) {
      clients.push(...(await Promise.all(Array.from({ length: Math.min(50, streams - i) }, () => openStream(service.base, key.apiKey, seen)))));
    }
    log(`${clients.length} streams open; committing ${rate} events/s for ${seconds} s`);

    const rss: Array<[number, number]> = [[0, rssMb(pid)]];
    const started = performance.now();
    const sampler = setInterval(() => rss.push([Math.round((performance.now() - started) / 1000), rssMb(pid)]), 5_000);
    const total = rate * seconds;
    const pending: Array<Promise<void>> = [];
    for (let i = 0; i < total; i++) {
      const wait = started + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(
        recordEvent(db, key.workspaceId, 'nps.answered', { id: `bench-${i}`, score: 9 }, SYSTEM).then((id) => void committedAt.set(id, performance.now())),
      );
    }
    await Promise.all(pending);
    const deadline = Date.now() + 30_000;
    while (received < total * streams && Date.now() < deadline) await sleep(100);
    clearInterval(sampler);
    rss.push([Math.round((performance.now() - started) / 1000), rssMb(pid)]);
    for (const client of clients) client.destroy();
    await stopProcess(service.child);

    const p50 = pct(latencies, 50);
    const p99 = pct(latencies, 99);
    const growth = rss.at(-1)![1] - rss[1]![1];
    const machine = `${os.cpus().length} CPUs, load ${loadAverage()}, Node ${process.version}`;
    const rows = [
      ['streams open on one instance', String(clients.length)],
      ['events committed', `${total} at ${rate}/s`],
      ['frames read (events x streams)', `${received} of ${total * streams}`],
      ['commit -> every client: p50 / p99', `${ms(p50)} / ${ms(p99)} (target p99 <= 200 ms: ${p99 <= 200 ? 'met' : 'missed'})`],
      ['service RSS (MB) every 5 s', rss.map(([s, mb]) => `${s}s ${mb.toFixed(0)}`).join(', ')],
      ['RSS from 5 s to the end', `${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB`],
    ];
    for (const [what, value] of rows) log(`${what}: ${value}`);
    const table = ['| measure | value |', '|---|---|', ...rows.map(([a, b]) => `| ${a} | ${b} |`)].join('\n');
    writeReport('stream', `# Stream bench ${stamp}\n\n${machine}\n\n${table}\n`);
  } finally {
    await stopAll();
    await drop();
  }
}

main().catch(async (err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
