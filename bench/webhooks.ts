// npm run bench:webhooks (also the end of npm run bench): the webhook targets, against the service as
// shipped (production mode, its own fresh PostgreSQL database, Redis) and a local receiver in this
// process (test/helpers/receiver.ts, answering 204 at once).
// (0) Issue 34's target: the keyless POST /v1/contacts rate measured closed loop (a workspace with no
// endpoint, so no deliveries), then contacts created at 40 % of that rate (open loop) in a workspace
// with one endpoint subscribed to contact.created: each contact's 201 -> its delivery reaching the
// receiver, p50/p95/p99, and how many never arrived. (1) The same at a fixed 200/s (BENCH_WEBHOOK_RATE).
// (1b) Events committed by recordEvent from this process at that rate: the delivery pipeline alone,
// without the API's own work, and its service CPU a delivery. (2) A backlog of deliveries committed at
// once (recordEvent, the service's own fan-out, in one transaction) draining into the receiver:
// deliveries/s and CPU a delivery, to one endpoint (bounded by WEBHOOK_ENDPOINT_CONCURRENCY) and spread
// over eight. BENCH_SCALE scales the backlog (10,000 deliveries at 1), BENCH_DURATION_S the runs (the
// rate measurement lasts BENCH_DURATION_S, the paced runs x2). BENCH_WEBHOOKS_ONLY=rate40,fixed,direct,backlog
// picks phases. Each phase says the PostgreSQL transactions (round trips outside a transaction) and the
// service's CPU per delivery. Prints the targets, met or missed, and writes
// bench/results/runs/webhooks-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
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
import { groupCpuMs, loadAverage, pidsWakeups } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { freePort, httpStatus, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, durationS, log, ms, pct, post, redisUrl, ROOT, scale, stamp, writeReport } from './lib/service-bench.js';

const backlogSize = Math.max(200, Math.round(10_000 * scale));
const phases = new Set((process.env.BENCH_WEBHOOKS_ONLY || 'rate40,fixed,direct,backlog').split(',').map((p) => p.trim()));
/** Issue 34's targets. */
const TARGET_P50_MS = 100;
const TARGET_CPU_US = 800;
/** How long a paced run's deliveries may take to arrive after its last request before the rest count as missing. */
const ARRIVAL_WAIT_MS = 30_000;

type ProfilePhase = 'rate40' | 'fixed' | 'direct';

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('webhooks', 4);
  const receiver = await WebhookReceiver.start();
  const workDir = makeWorkDir();
  const rows: string[][] = [];
  const notes: string[] = [];
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    // A workspace with no endpoint: the keyless POST /v1/contacts rate, its events delivered nowhere.
    const bare = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench, no endpoint' });
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
    // BENCH_WEBHOOK_PROFILE=<file.cpuprofile>: a CPU profile of the service over one paced run,
    // BENCH_WEBHOOK_PROFILE_PHASE's (fixed by default; rate40, direct) (bench/profile.ts reads it).
    const profile = process.env.BENCH_WEBHOOK_PROFILE ? path.resolve(process.env.BENCH_WEBHOOK_PROFILE) : undefined;
    const profilePhase = (process.env.BENCH_WEBHOOK_PROFILE_PHASE || 'fixed') as ProfilePhase;
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
    const pid = service.child.pid!;
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

    /** What one phase cost: the service's CPU and the PostgreSQL transactions (statements outside one count one each). */
    const xacts = async (): Promise<number> =>
      Number((await sql<{ n: string }>`select xact_commit::text as n from pg_stat_database where datname = current_database()`.execute(db)).rows[0]!.n);
    const costMeter = async () => {
      const [cpu0, wakeups0, xact0] = [groupCpuMs(pid), pidsWakeups([pid]), await xacts()];
      return async (deliveries: number) => {
        const cpuUs = ((groupCpuMs(pid) - cpu0) * 1000) / Math.max(1, deliveries);
        // The service's main thread going to sleep and waking again: what a delivery costs most
        // besides its round trips, and, unlike the CPU, hardly moved by the other work on the machine.
        const wakeups = (pidsWakeups([pid]) - wakeups0) / Math.max(1, deliveries);
        await sleep(1_000); // pg_stat_database is updated when backends report
        // The bench's own statements (recordEvent, this meter's two reads) are in it too: at most one an event.
        const perDelivery = ((await xacts()) - xact0) / Math.max(1, deliveries);
        return { cpuUs, wakeups, xactPerDelivery: perDelivery };
      };
    };
    const startProfile = (phase: ProfilePhase) => {
      if (profile && phase === profilePhase) process.kill(pid, 'SIGUSR2');
    };
    const stopProfile = async (phase: ProfilePhase) => {
      if (!profile || phase !== profilePhase) return;
      process.kill(pid, 'SIGUSR2');
      while (!fs.existsSync(profile)) await sleep(100);
    };

    // Warm-up: 50 contacts, one after the other, and their deliveries.
    let n = 0;
    const contact = () => JSON.stringify({ name: `Contato ${n++}` });
    for (let i = 0; i < 50; i++) await post(`${base}/v1/contacts`, contact(), auth);
    await receiver.waitFor(50, '/latency', 30_000);
    // As autovacuum would have (some servers, this bench machine's among them, run without it): the
    // statements planned on the tables as they are, not as they were empty.
    await sql`analyze`.execute(db);

    /**
     * Contacts created at `rate`/s (open loop) for BENCH_DURATION_S x 2: each 201 (its contact.created
     * committed) -> its delivery reaching the receiver. Missing: a 201 whose delivery had not come
     * ARRIVAL_WAIT_MS after the last one.
     */
    const pacedContacts = async (phase: ProfilePhase, rate: number, label: string): Promise<void> => {
      const total = Math.max(1, Math.round(rate * durationS * 2));
      const committedAt = new Map<string, number>();
      const arrived = new Map<string, number>();
      const seen0 = receiver.to('/latency').length;
      const collect = () => {
        for (const request of receiver.to('/latency').slice(seen0)) {
          const id = (JSON.parse(request.body) as { data: { object: { id: string } } }).data.object.id;
          if (!arrived.has(id)) arrived.set(id, request.at);
        }
      };
      startProfile(phase);
      const meter = await costMeter();
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
      const waitUntil = Date.now() + ARRIVAL_WAIT_MS;
      for (;;) {
        collect();
        if ([...committedAt.keys()].every((id) => arrived.has(id)) || Date.now() > waitUntil) break;
        await sleep(50);
      }
      await stopProfile(phase);
      const latencies: number[] = [];
      for (const [id, at] of committedAt) {
        const got = arrived.get(id);
        if (got !== undefined) latencies.push(Math.max(0, got - at));
      }
      const missing = committedAt.size - latencies.length;
      const cost = await meter(latencies.length);
      const figures = `p50 ${ms(pct(latencies, 50))}, p95 ${ms(pct(latencies, 95))}, p99 ${ms(pct(latencies, 99))}, ${missing} missing of ${committedAt.size}`;
      log(`POST /v1/contacts at ${rate.toFixed(0)}/s (${label}): due -> 201 p50 ${ms(pct(answered, 50))}, p95 ${ms(pct(answered, 95))}, ${errors} errors`);
      log(
        `  201 -> its contact.created delivery: ${figures}; service CPU ${cost.cpuUs.toFixed(0)} µs a contact with its delivery, ${cost.wakeups.toFixed(2)} wake-ups of its main thread, ${cost.xactPerDelivery.toFixed(1)} PostgreSQL transactions a contact`,
      );
      notes.push(
        `contacts at ${rate.toFixed(0)}/s (${label}): ${figures}; service CPU ${cost.cpuUs.toFixed(0)} µs a contact with its delivery, ${cost.xactPerDelivery.toFixed(1)} PostgreSQL transactions a contact`,
      );
      const met = pct(latencies, 50) <= TARGET_P50_MS && missing === 0 && errors === 0;
      rows.push([
        `POST /v1/contacts at ${label} (${rate.toFixed(0)}/s): 201 -> its contact.created delivery, p50 / p95 / p99, missing`,
        `${ms(pct(latencies, 50))} / ${ms(pct(latencies, 95))} / ${ms(pct(latencies, 99))}, ${missing} missing${errors ? `, ${errors} errors` : ''}`,
        `p50 <= ${TARGET_P50_MS} ms, none missing`,
        met ? 'met' : 'missed',
      ]);
    };

    // (0) The keyless POST /v1/contacts rate, closed loop, where no endpoint listens; then 40 % of it.
    if (phases.has('rate40')) {
      const spec = (d: number): LoadSpec => ({
        url: `${base}/v1/contacts`,
        method: 'POST',
        headers: { authorization: `Bearer ${bare.apiKey}`, 'Content-Type': 'application/json' },
        variants: Array.from({ length: Math.max(1_000, 4_000 * d) }, (_, i) => ({ body: JSON.stringify({ name: `Cliente ${i}` }) })),
        connections: 50,
        durationS: d,
      });
      await runLoad(spec(1), workDir);
      const measured = await runLoad(spec(durationS), workDir);
      if (measured.non2xx + measured.socketErrors > 0)
        throw new Error(`the rate measurement: ${measured.non2xx} non-2xx, ${measured.socketErrors} socket errors`);
      log(`keyless POST /v1/contacts, closed loop (${measured.tool}, 50 connections, ${durationS} s), no endpoint: ${measured.rps.toFixed(0)} req/s`);
      notes.push(`keyless POST /v1/contacts rate measured in this run: ${measured.rps.toFixed(0)} req/s (${measured.tool}, 50 connections, ${durationS} s)`);
      await sleep(500);
      await pacedContacts('rate40', 0.4 * measured.rps, `40 % of the measured keyless rate (${measured.rps.toFixed(0)}/s)`);
    }

    const rate = Number(process.env.BENCH_WEBHOOK_RATE || 200);
    // (1) Events committed at a fixed 200/s -> first attempt at the receiver.
    if (phases.has('fixed')) await pacedContacts('fixed', rate, `a fixed ${rate}/s`);

    // (1b) The same rate with the events committed by recordEvent from here (one statement each, as
    // a change's transaction commits it): the webhook pipeline alone, without the API's own work.
    if (phases.has('direct')) {
      const total = rate * durationS * 2;
      const directAt = new Map<string, number>();
      const direct0 = receiver.to('/latency-direct').length;
      startProfile('direct');
      const meter = await costMeter();
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
      await stopProfile('direct');
      const direct: number[] = [];
      for (const request of receiver.to('/latency-direct').slice(direct0)) {
        const at = directAt.get((JSON.parse(request.body) as { data: { object: { id: string } } }).data.object.id);
        if (at !== undefined) direct.push(Math.max(0, request.at - at));
      }
      const cost = await meter(direct.length);
      log(
        `events committed directly at ${rate}/s: committed -> first attempt p50 ${ms(pct(direct, 50))}, p95 ${ms(pct(direct, 95))}, p99 ${ms(pct(direct, 99))}; service CPU ${cost.cpuUs.toFixed(0)} µs a delivery, ${cost.wakeups.toFixed(2)} wake-ups of its main thread, ${cost.xactPerDelivery.toFixed(1)} PostgreSQL transactions a delivery (the event's own included)`,
      );
      notes.push(
        `events committed directly at ${rate}/s: service CPU ${cost.cpuUs.toFixed(0)} µs a delivery, ${cost.wakeups.toFixed(2)} wake-ups of its main thread, ${cost.xactPerDelivery.toFixed(1)} PostgreSQL transactions a delivery (the event's own included)`,
      );
      rows.push([
        `event committed (recordEvent, no API request) -> first attempt, at a fixed ${rate}/s: p50 / p95`,
        `${ms(pct(direct, 50))} / ${ms(pct(direct, 95))}`,
        `p50 <= ${TARGET_P50_MS} ms`,
        pct(direct, 50) <= TARGET_P50_MS ? 'met' : 'missed',
      ]);
      rows.push([
        `service CPU a delivery, events committed directly at ${rate}/s`,
        `${cost.cpuUs.toFixed(0)} µs`,
        `<= ${TARGET_CPU_US} µs`,
        cost.cpuUs <= TARGET_CPU_US ? 'met' : 'missed',
      ]);
    }

    // (2) Backlogs: committed at once, drained into the receiver.
    const drain = async (what: string, type: 'thread.created' | 'thread.updated', events: number, paths: string[]): Promise<void> => {
      const counts = paths.map((p) => receiver.to(p).length);
      const meter = await costMeter();
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
      const cost = await meter(expected);
      log(
        `${what}: ${expected} deliveries in ${((last - committed) / 1000).toFixed(1)} s = ${perSecond.toFixed(0)}/s, service CPU ${cost.cpuUs.toFixed(0)} µs a delivery, ${cost.wakeups.toFixed(2)} wake-ups of its main thread, ${cost.xactPerDelivery.toFixed(2)} PostgreSQL transactions a delivery`,
      );
      notes.push(`${what}: service CPU ${cost.cpuUs.toFixed(0)} µs a delivery, ${cost.xactPerDelivery.toFixed(2)} PostgreSQL transactions a delivery`);
      rows.push([`${what}: ${expected} deliveries committed at once`, `${perSecond.toFixed(0)}/s`, '>= 500/s', perSecond >= 500 ? 'met' : 'missed']);
      rows.push([`${what}: service CPU a delivery`, `${cost.cpuUs.toFixed(0)} µs`, `<= ${TARGET_CPU_US} µs`, cost.cpuUs <= TARGET_CPU_US ? 'met' : 'missed']);
    };
    if (phases.has('backlog')) {
      await drain('backlog to one endpoint', 'thread.created', backlogSize, [single]);
      await drain('backlog over eight endpoints', 'thread.updated', Math.ceil(backlogSize / 8), spread);
    }

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
    fs.rmSync(workDir, { recursive: true, force: true });
    agent.destroy();
  }
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const machine = `BENCH_DURATION_S=${durationS}, BENCH_SCALE=${scale} (backlog ${backlogSize}), WEBHOOK_CONCURRENCY ${process.env.WEBHOOK_CONCURRENCY || 64}, WEBHOOK_ENDPOINT_CONCURRENCY ${process.env.WEBHOOK_ENDPOINT_CONCURRENCY || 8}, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  log(machine);
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
