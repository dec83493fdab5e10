// npm run bench:stream: the live event stream (GET /v1/events/stream) against the service as shipped
// (production mode, its own fresh PostgreSQL database, Redis): BENCH_STREAMS concurrent streams
// (1,000) of one workspace on one instance, events committed at BENCH_STREAM_RATE a second (100,
// recordEvent from this process, one transaction each, with the event log's consumers registered as
// the service registers them: the `stream` one sends the NOTIFY) for BENCH_STREAM_SECONDS (60). Measures commit
// (recordEvent resolved) -> frame read by each client: p50 / p99 over every (event, client) pair;
// per event, commit -> its first client (the service's wake-up and read of the log) and its first ->
// last client (the fan-out and the readers); the CPU of the service, its PostgreSQL backends and
// this process; the service's RSS every 5 s. The clients run in a worker thread of this process
// (bench/lib/stream-clients.ts: raw sockets that only scan for `id:` lines). BENCH_STREAM_PROFILE=<file>
// writes a CPU profile of the service over the commits (bench/profile.ts reads it). Prints a table
// and writes bench/results/runs/stream-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { migrateToLatest } from '../src/db/migrate.js';
import { recordEvent } from '../src/events/record.js';
import { registerEventConsumers } from '../src/event-consumers.js';
import { SYSTEM } from '../src/actor.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { groupCpuMs, loadAverage, pidsCpuMs } from './lib/cpu.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, log, ms, pct, startBenchService, stamp, writeReport } from './lib/service-bench.js';
import type { ClientsCommand, ClientsInput, ClientsMessage } from './lib/stream-clients.js';

const streams = Number(process.env.BENCH_STREAMS || 1_000);
const rate = Number(process.env.BENCH_STREAM_RATE || 100);
const seconds = Number(process.env.BENCH_STREAM_SECONDS || 60);
const profile = process.env.BENCH_STREAM_PROFILE ? path.resolve(process.env.BENCH_STREAM_PROFILE) : undefined;

/** Milliseconds on the clock the client worker stamps its reads with. */
const now = (): number => performance.timeOrigin + performance.now();

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** The client worker, with a way to wait for its next message of a kind. */
function startClients(input: ClientsInput): {
  worker: Worker;
  next<K extends ClientsMessage['kind']>(kind: K): Promise<Extract<ClientsMessage, { kind: K }>>;
  send(command: ClientsCommand): void;
} {
  // A worker does not inherit tsx's loader on Node 20: it registers it, then loads the TypeScript.
  const file = new URL('./lib/stream-clients.ts', import.meta.url).href;
  const boot = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(file)}); })`;
  const worker = new Worker(boot, { eval: true, workerData: input });
  const waiting: Array<{ kind: string; resolve(message: ClientsMessage): void; reject(err: Error): void }> = [];
  worker.on('message', (message: ClientsMessage) => {
    if (message.kind === 'error') {
      for (const w of waiting.splice(0)) w.reject(new Error(message.message));
      return;
    }
    const at = waiting.findIndex((w) => w.kind === message.kind);
    if (at !== -1) waiting.splice(at, 1)[0]!.resolve(message);
  });
  worker.on('error', (err) => {
    for (const w of waiting.splice(0)) w.reject(err);
  });
  return {
    worker,
    next: (kind) => new Promise((resolve, reject) => waiting.push({ kind, resolve: resolve as (message: ClientsMessage) => void, reject })),
    send: (command) => worker.postMessage(command),
  };
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('stream', 8);
  try {
    await migrateToLatest(db);
    // This process records the events: as a writer of the service does, it runs the log's consumers.
    registerEventConsumers({ aiBaseUrl: undefined, aiReplyDelayMs: 0, automationsInline: true });
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    const hook = profile ? ['--import', './bench/cpu-profile-hook.ts'] : [];
    const service = await startBenchService(
      'stream',
      { DATABASE_URL: databaseUrl, MAX_CONNECTIONS: String(streams + 100), STREAMS_PER_KEY: String(streams), ...(profile && { BENCH_CPU_PROFILE: profile }) },
      hook,
    );
    const pid = service.child.pid!;
    const url = new URL(service.base);
    const clients = startClients({ host: url.hostname, port: Number(url.port), key: key.apiKey, streams });
    const opened = clients.next('open');
    const { streams: open } = await opened;
    log(`${open} streams open; committing ${rate} events/s for ${seconds} s`);

    // The service's own PostgreSQL backends (its pool and its LISTEN connections), not the bench's.
    const backends = (
      await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`.execute(db)
    ).rows.map((row) => row.pid);
    const committedAt = new Map<string, number>();
    const rss: Array<[number, number]> = [[0, rssMb(pid)]];
    const started = performance.now();
    const sampler = setInterval(() => rss.push([Math.round((performance.now() - started) / 1000), rssMb(pid)]), 5_000);
    const cpu0 = { service: groupCpuMs(pid), bench: process.cpuUsage(), postgres: pidsCpuMs(backends) };
    if (profile) process.kill(pid, 'SIGUSR2');
    const total = rate * seconds;
    const pending: Array<Promise<void>> = [];
    for (let i = 0; i < total; i++) {
      const wait = started + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(recordEvent(db, key.workspaceId, 'nps.answered', { id: `bench-${i}`, score: 9 }, SYSTEM).then((id) => void committedAt.set(id, now())));
    }
    await Promise.all(pending);
    const deadline = Date.now() + 30_000;
    let received = 0;
    for (;;) {
      const progress = clients.next('progress');
      clients.send({ kind: 'progress' });
      received = (await progress).frames;
      if (received >= total * open || Date.now() > deadline) break;
      await sleep(100);
    }
    const windowS = (performance.now() - started) / 1000;
    if (profile) process.kill(pid, 'SIGUSR2');
    const cpuBench = process.cpuUsage(cpu0.bench);
    const cpu = {
      service: groupCpuMs(pid) - cpu0.service,
      bench: (cpuBench.user + cpuBench.system) / 1000,
      postgres: pidsCpuMs(backends) - cpu0.postgres,
    };
    clearInterval(sampler);
    rss.push([Math.round((performance.now() - started) / 1000), rssMb(pid)]);
    const arrivalsMessage = clients.next('arrivals');
    clients.send({ kind: 'finish' });
    const arrivals = await arrivalsMessage;
    await clients.worker.terminate();
    if (profile) {
      const deadlineProfile = Date.now() + 30_000;
      while (!fs.existsSync(profile) && Date.now() < deadlineProfile) await sleep(100);
    }
    await stopProcess(service.child);

    const latencies: number[] = [];
    const first: number[] = [];
    const spread: number[] = [];
    arrivals.ids.forEach((id, i) => {
      const at = committedAt.get(id);
      const times = arrivals.times[i]!.subarray(0, arrivals.counts[i]);
      if (at === undefined || times.length === 0) return;
      let min = Infinity;
      let max = -Infinity;
      for (const t of times) {
        // A frame can be read before recordEvent's promise resolves: that is 0 ms.
        latencies.push(Math.max(0, t - at));
        if (t < min) min = t;
        if (t > max) max = t;
      }
      first.push(Math.max(0, min - at));
      spread.push(max - min);
    });

    const p50 = pct(latencies, 50);
    const p99 = pct(latencies, 99);
    const growth = rss.at(-1)![1] - rss[1]![1];
    const machine = `${os.cpus().length} CPUs, load ${loadAverage()}, Node ${process.version}`;
    const perEvent = (cpuMs: number): string => `${((cpuMs * 1000) / total).toFixed(0)} µs`;
    const rows = [
      ['streams open on one instance', String(open)],
      ['events committed', `${total} at ${rate}/s`],
      ['frames read (events x streams)', `${received} of ${total * open}`],
      ['commit -> every client: p50 / p99', `${ms(p50)} / ${ms(p99)} (target p99 <= 200 ms: ${p99 <= 200 ? 'met' : 'missed'})`],
      ['commit -> first client, per event: p50 / p99', `${ms(pct(first, 50))} / ${ms(pct(first, 99))}`],
      ['first -> last client, per event: p50 / p99', `${ms(pct(spread, 50))} / ${ms(pct(spread, 99))}`],
      [
        `CPU over the ${windowS.toFixed(0)} s (a second each core): service / its PostgreSQL backends / bench (clients + commits)`,
        `${(cpu.service / 1000).toFixed(1)} s / ${(cpu.postgres / 1000).toFixed(1)} s / ${(cpu.bench / 1000).toFixed(1)} s (service ${perEvent(cpu.service)} an event)`,
      ],
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
