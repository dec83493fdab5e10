// npm run bench:webhooks (also the end of npm run bench): the webhook targets, against the service as
// shipped (production mode, its own fresh PostgreSQL database, Redis) and a local receiver in this
// process (test/helpers/receiver.ts, answering 204 at once). (1) Events committed at a fixed 200/s
// (POST /v1/contacts, open loop; each 201 means its contact.created committed) to the first attempt
// reaching the receiver: p50/p95; (1b) the same with the events committed by recordEvent from this
// process, the pipeline without the API's own work. (2) A backlog of deliveries committed at once (recordEvent, the
// service's own fan-out, in one transaction) draining into the receiver: deliveries/s, to one
// endpoint (bounded by WEBHOOK_ENDPOINT_CONCURRENCY) and spread over eight. BENCH_SCALE scales the
// backlog (10,000 deliveries at 1), BENCH_DURATION_S the fixed-rate run (x2). Prints a table and
// writes bench/results/runs/webhooks-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { SYSTEM } from '../src/actor.js';
import { recordEvent } from '../src/events/record.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { WebhookReceiver } from '../test/helpers/receiver.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { freePort, httpStatus, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, durationS, log, ms, pct, post, redisUrl, ROOT, scale, stamp, writeReport } from './lib/service-bench.js';

const backlogSize = Math.max(200, Math.round(10_000 * scale));

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('webhooks', 4);
  const receiver = await WebhookReceiver.start();
  const rows: string[][] = [];
  const notes: string[] = [];
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      ...process.env,
      NODE_ENV: 'production',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `sf-bench-webhooks:${stamp}:`,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      // The receiver is on loopback.
      OUTBOUND_ALLOW_PRIVATE_URLS: 'true',
    };
    // BENCH_WEBHOOK_PROFILE=<file.cpuprofile>: a CPU profile of the service over the fixed-rate run (bench/profile.ts reads it).
    const profile = process.env.BENCH_WEBHOOK_PROFILE ? path.resolve(process.env.BENCH_WEBHOOK_PROFILE) : undefined;
    const hook = profile ? ['--import', './bench/cpu-profile-hook.ts'] : [];
    const service = startProcess(
      process.execPath,
      ['--import', 'tsx', ...hook, 'src/server.ts'],
      { ...env, ...(profile && { BENCH_CPU_PROFILE: profile }) },
      ROOT,
      true,
    );
    const deadline = Date.now() + 120_000;
    while ((await httpStatus(`${base}/healthz`)) !== 200) {
      if (Date.now() > deadline) throw new Error(`the service did not start:\n${service.output()}`);
      await sleep(200);
    }
    const auth = { authorization: `Bearer ${key.apiKey}` };
    const endpoint = async (events: string[], hookPath: string): Promise<string> => {
      const made = await post(`${base}/v1/webhook-endpoints`, JSON.stringify({ url: `${receiver.url}${hookPath}`, events }), auth);
      if (made.status !== 201) throw new Error(`creating an endpoint: ${made.status} ${made.body}`);
      return (JSON.parse(made.body) as { id: string }).id;
    };
    await endpoint(['contact.created'], '/latency');
    await endpoint(['nps.answered'], '/latency-direct');
    const single = '/backlog-single';
    await endpoint(['thread.created'], single);
    const spread = Array.from({ length: 8 }, (_, i) => `/backlog-spread-${i}`);
    for (const p of spread) await endpoint(['thread.updated'], p);

    // Warm-up: a second of contacts at 50/s.
    let n = 0;
    const contact = () => JSON.stringify({ name: `Contato ${n++}` });
    for (let i = 0; i < 50; i++) await post(`${base}/v1/contacts`, contact(), auth);
    await receiver.waitFor(50, '/latency', 30_000);

    // (1) Events committed at a fixed 200/s -> first attempt at the receiver.
    const rate = Number(process.env.BENCH_WEBHOOK_RATE || 200);
    const total = rate * durationS * 2;
    const committedAt = new Map<string, number>();
    if (profile) process.kill(service.child.pid!, 'SIGUSR2');
    const xacts = async (): Promise<number> =>
      Number((await sql<{ n: string }>`select xact_commit::text as n from pg_stat_database where datname = current_database()`.execute(db)).rows[0]!.n);
    const xact0 = await xacts();
    const fixedCpu0 = groupCpuMs(service.child.pid!);
    const start = performance.now() + 100;
    const pending: Array<Promise<void>> = [];
    let errors = 0;
    const answered: number[] = [];
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(
        post(`${base}/v1/contacts`, contact(), auth).then((answer) => {
          if (answer.status !== 201) return void errors++;
          answered.push(performance.now() - due);
          committedAt.set((JSON.parse(answer.body) as { id: string }).id, Date.now());
        }),
      );
    }
    await Promise.all(pending);
    log(`POST /v1/contacts at ${rate}/s: due -> 201 p50 ${ms(pct(answered, 50))}, p95 ${ms(pct(answered, 95))}`);
    const before = 50;
    await receiver.waitFor(before + committedAt.size, '/latency', 60_000);
    const latencies: number[] = [];
    for (const request of receiver.to('/latency').slice(before)) {
      const at = committedAt.get((JSON.parse(request.body) as { data: { object: { id: string } } }).data.object.id);
      if (at !== undefined) latencies.push(Math.max(0, request.at - at));
    }
    const fixedCpuUs = ((groupCpuMs(service.child.pid!) - fixedCpu0) * 1000) / Math.max(1, latencies.length);
    if (profile) {
      process.kill(service.child.pid!, 'SIGUSR2');
      while (!fs.existsSync(profile)) await sleep(100);
    }
    log(
      `events at ${rate}/s: ${latencies.length} delivered, committed -> first attempt p50 ${ms(pct(latencies, 50))}, p95 ${ms(pct(latencies, 95))}, p99 ${ms(pct(latencies, 99))}, ${errors} errors; service CPU ${fixedCpuUs.toFixed(0)} µs an event (its POST and its delivery)`,
    );
    await sleep(1_000); // pg_stat_database is updated when backends report
    const xactPerEvent = ((await xacts()) - xact0) / Math.max(1, latencies.length);
    log(`  ${xactPerEvent.toFixed(1)} PostgreSQL transactions an event (statements outside a transaction count one each)`);
    notes.push(
      `events at ${rate}/s: service CPU ${fixedCpuUs.toFixed(0)} µs an event (its POST /v1/contacts and its delivery), ${xactPerEvent.toFixed(1)} PostgreSQL transactions an event`,
    );
    rows.push([
      `POST /v1/contacts at a fixed ${rate}/s: its contact.created committed (the 201) -> first attempt: p50 / p95`,
      `${ms(pct(latencies, 50))} / ${ms(pct(latencies, 95))}`,
      'p50 <= 100 ms',
      pct(latencies, 50) <= 100 ? 'met' : 'missed',
    ]);

    // (1b) The same rate with the events committed by recordEvent from here (one statement each, as
    // a change's transaction commits it): the webhook pipeline alone, without the API's own work.
    const directAt = new Map<string, number>();
    const direct0 = receiver.to('/latency-direct').length;
    const directCpu0 = groupCpuMs(service.child.pid!);
    const directStart = performance.now() + 100;
    const directPending: Array<Promise<void>> = [];
    for (let i = 0; i < total; i++) {
      const due = directStart + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const id = `direct-${i}`;
      directPending.push(recordEvent(db, key.workspaceId, 'nps.answered', { id }, SYSTEM).then(() => void directAt.set(id, Date.now())));
    }
    await Promise.all(directPending);
    await receiver.waitFor(direct0 + total, '/latency-direct', 60_000);
    const direct: number[] = [];
    for (const request of receiver.to('/latency-direct').slice(direct0)) {
      const at = directAt.get((JSON.parse(request.body) as { data: { object: { id: string } } }).data.object.id);
      if (at !== undefined) direct.push(Math.max(0, request.at - at));
    }
    const directCpuUs = ((groupCpuMs(service.child.pid!) - directCpu0) * 1000) / Math.max(1, direct.length);
    log(
      `events committed directly at ${rate}/s: committed -> first attempt p50 ${ms(pct(direct, 50))}, p95 ${ms(pct(direct, 95))}, p99 ${ms(pct(direct, 99))}; service CPU ${directCpuUs.toFixed(0)} µs an event (its delivery)`,
    );
    notes.push(`events committed directly at ${rate}/s: service CPU ${directCpuUs.toFixed(0)} µs an event (its delivery)`);
    rows.push([
      `event committed (recordEvent, no API request) -> first attempt, at a fixed ${rate}/s: p50 / p95`,
      `${ms(pct(direct, 50))} / ${ms(pct(direct, 95))}`,
      'p50 <= 100 ms',
      pct(direct, 50) <= 100 ? 'met' : 'missed',
    ]);

    // (2) Backlogs: committed at once, drained into the receiver.
    const drain = async (what: string, type: 'thread.created' | 'thread.updated', events: number, paths: string[]): Promise<void> => {
      const counts = paths.map((p) => receiver.to(p).length);
      const cpu0 = groupCpuMs(service.child.pid!);
      const committed = await commitBacklog(db, key.workspaceId, type, events);
      const expected = events * paths.length;
      const deliveryDeadline = Date.now() + 600_000;
      while (paths.reduce((sum, p, i) => sum + receiver.to(p).length - counts[i]!, 0) < expected) {
        if (Date.now() > deliveryDeadline) throw new Error(`${what}: the backlog did not drain`);
        await sleep(20);
      }
      const last = Math.max(
        ...paths.flatMap((p, i) =>
          receiver
            .to(p)
            .slice(counts[i])
            .map((r) => r.at),
        ),
      );
      const perSecond = expected / ((last - committed) / 1000);
      const cpuUs = ((groupCpuMs(service.child.pid!) - cpu0) * 1000) / expected;
      log(
        `${what}: ${expected} deliveries in ${((last - committed) / 1000).toFixed(1)} s = ${perSecond.toFixed(0)}/s, service CPU ${cpuUs.toFixed(0)} µs a delivery`,
      );
      notes.push(`${what}: service CPU ${cpuUs.toFixed(0)} µs a delivery`);
      rows.push([`${what}: ${expected} deliveries committed at once`, `${perSecond.toFixed(0)}/s`, '>= 500/s', perSecond >= 500 ? 'met' : 'missed']);
    };
    await drain('backlog to one endpoint', 'thread.created', backlogSize, [single]);
    await drain('backlog over eight endpoints', 'thread.updated', Math.ceil(backlogSize / 8), spread);

    const warnings = service
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50'));
    if (warnings.length > 0) log(`service warnings (last ${warnings.length}):\n${warnings.slice(-10).join('\n')}`);
    await stopProcess(service.child);
  } finally {
    await receiver.close();
    await stopAll();
    await drop();
    agent.destroy();
  }
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const machine = `BENCH_DURATION_S=${durationS}, BENCH_SCALE=${scale} (backlog ${backlogSize}), WEBHOOK_CONCURRENCY 64, WEBHOOK_ENDPOINT_CONCURRENCY 8, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('webhooks', `# Webhooks bench ${stamp}\n\n${machine}\n\n${table}\n\n${notes.join('\n')}\n`);
}

/** `events` events of `type` recorded in one transaction by the service's own recordEvent (each fanned out to its endpoints); when it committed. */
async function commitBacklog(db: Db, workspaceId: string, type: 'thread.created' | 'thread.updated', events: number): Promise<number> {
  await db.transaction().execute(async (trx) => {
    for (let i = 0; i < events; i++) await recordEvent(trx, workspaceId, type, { id: `bench-${i}`, status: 'open' }, SYSTEM);
  });
  return Date.now();
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:webhooks failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
