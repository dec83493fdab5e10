// npm run bench:channels (also the end of npm run bench): the channels' targets, against the service
// as shipped (production mode, its own fresh PostgreSQL database, Redis) and a Graph double in this
// process. (1) Signed WhatsApp webhook POSTs at full speed against POST /v1/messages in the same
// run, closed loop; (2) webhooks at a fixed 200/s, open loop, p50/p99; (3) outbound at a fixed
// 100 messages/s, from the 201 to the Graph request; (4) a backlog of 10,000 queued messages over
// 1,000 contacts draining into a Graph double that answers after 50 ms, order per contact checked.
// Prints a table and writes bench/results/runs/channels-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR). The load generators run in this
// process too (they are light next to the service, but share the 2 cores with it). (1) also prints
// the service's CPU (its process group, from /proc) per signed inbound and per POST /v1/messages
// (whose delivery job, run by the same process, is counted with it); BENCH_CHANNELS_PROFILE=<file>
// writes a CPU profile of the service over the first round's webhooks (bench/profile.ts reads it).
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { NO_WORKSPACE } from '../src/jobs/recurring.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { GraphDouble, metaSignature, sentAnswer, whatsappDelivery, whatsappText } from '../test/helpers/graph.js';
import { freePort, httpStatus, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, durationS, fullSpeed, log, ms, pct, post, profiledWindow, redisUrl, ROOT, stamp, writeReport } from './lib/service-bench.js';

/** The template of a recorded Graph send request, as the bench reads it. */
const templateOf = (body: unknown) =>
  (body as { template?: { name?: string; components?: Array<{ parameters?: Array<{ text: string }> }> } } | undefined)?.template;
import { groupCpuMs, loadAverage, machineCpuMs, pidsCpuMs, postgresPids } from './lib/cpu.js';

const concurrency = process.env.BENCH_DELIVERY_CONCURRENCY || '64';
/** Which measurements to run (default all): inbound, fixed, outbound, backlog. */
const only = new Set((process.env.BENCH_CHANNELS_ONLY || 'inbound,fixed,outbound,backlog').split(','));
/** BENCH_CHANNELS_PROFILE=<file>: a CPU profile of the service over the first round's webhooks of (1). */
const profile = process.env.BENCH_CHANNELS_PROFILE ? path.resolve(process.env.BENCH_CHANNELS_PROFILE) : undefined;

/** Open loop: request i due at start + i/rate; latency from when it was due. */
async function paced(
  rate: number,
  seconds: number,
  next: (i: number) => { url: string; body: string; headers: Record<string, string> },
  onAnswer?: (i: number, at: number, body: string) => void,
) {
  const total = Math.round(rate * seconds);
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now() + 100;
  const pending: Array<Promise<void>> = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const r = next(i);
    pending.push(
      post(r.url, r.body, r.headers).then((answer) => {
        const at = performance.now();
        if (answer.status >= 200 && answer.status < 300) latencies.push(at - due);
        else errors++;
        onAnswer?.(i, Date.now(), answer.body);
      }),
    );
  }
  await Promise.all(pending);
  return { latencies, errors };
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('channels', 4);
  const graph = await GraphDouble.start();
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
      REDIS_PREFIX: `sf-bench-channels:${stamp}:`,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      META_GRAPH_URL: graph.url,
      DELIVERY_CONCURRENCY: concurrency,
      ...(profile && { BENCH_CPU_PROFILE: profile }),
    };
    const service = startProcess(
      process.execPath,
      ['--import', 'tsx', ...(profile ? ['--import', './bench/cpu-profile-hook.ts'] : []), 'src/server.ts'],
      env,
      ROOT,
      true,
    );
    const deadline = Date.now() + 120_000;
    while ((await httpStatus(`${base}/healthz`)) !== 200) {
      if (Date.now() > deadline) throw new Error(`the service did not start:\n${service.output()}`);
      await sleep(200);
    }
    const auth = { authorization: `Bearer ${key.apiKey}` };
    const meta = { externalId: '106540352242922', accessToken: 'EAAbench', appSecret: randomBytes(16).toString('hex'), verifyToken: 'v' };
    const created = await post(`${base}/v1/channels`, JSON.stringify({ type: 'whatsapp', name: 'Bench', provider: 'meta', meta }), auth);
    const channelId = (JSON.parse(created.body) as { id: string }).id;
    // 1,000 contacts with phones, made in bulk.
    await sql`insert into contacts (workspace_id, id, name, phone, created_at, updated_at)
              select ${key.workspaceId}::uuid, gen_random_uuid(), 'Contato ' || n, '+55119' || lpad(n::text, 8, '0'), now(), now()
                from generate_series(1, 1000) n`.execute(db);
    const contacts = (
      await sql<{ id: string; phone: string }>`select id, phone from contacts where workspace_id = ${key.workspaceId} order by phone`.execute(db)
    ).rows;
    graph.answer((request) => sentAnswer(request));

    let seq = 0;
    const webhook = () => {
      const n = seq++;
      const phone = contacts[n % contacts.length]!.phone.slice(1);
      const inbound = whatsappText(phone, `Mensagem ${n}`, 'Cliente', `wamid.bench.${stamp}.${n}`);
      const body = JSON.stringify(whatsappDelivery(meta.externalId, { messages: inbound.messages, contacts: inbound.contacts }));
      return { url: `${base}/webhooks/meta/${channelId}`, body, headers: { 'x-hub-signature-256': metaSignature(meta.appSecret, body) } };
    };
    let out = 0;
    const outbound = (id?: string) => {
      const n = out++;
      const contact = contacts[n % contacts.length]!;
      id ??= `o${n}`;
      return {
        url: `${base}/v1/messages`,
        body: JSON.stringify({ contactId: contact.id, channelId, template: { name: 'bench', language: 'pt_BR', parameters: [id] } }),
        headers: auth,
      };
    };

    // Warm-up, then (1) full speed, interleaved. ANALYZE after the seeding and the warm-up, as
    // autovacuum would have (some servers, this bench machine's among them, run without it): the
    // statements are then planned on the tables as they are, not as they were empty.
    await fullSpeed(2, 20, webhook);
    await fullSpeed(2, 20, () => outbound());
    await sql`analyze`.execute(db);
    if (only.has('inbound')) {
      const servicePid = service.child.pid!;
      /** A closed-loop run with the service's and PostgreSQL's CPU (µs) per answered request. */
      const measured = async (next: Parameters<typeof fullSpeed>[2]) => {
        const postgres = postgresPids();
        const [cpu0, pg0] = [groupCpuMs(servicePid), pidsCpuMs(postgres)];
        const run = await fullSpeed(durationS, 50, next);
        const perRequest = (ms: number) => (ms * 1000) / Math.max(1, run.rps * durationS);
        return { ...run, cpuUs: perRequest(groupCpuMs(servicePid) - cpu0), pgUs: perRequest(pidsCpuMs(postgres) - pg0) };
      };
      const inboundRuns: Array<{ rps: number; cpuUs: number; pgUs: number }> = [];
      const messageRuns: Array<{ rps: number; cpuUs: number; pgUs: number }> = [];
      const load0 = loadAverage();
      /** The service's CPU ms a second with no request (its timers, polls and recurring jobs), over the pauses between runs. */
      const idle = { ms: 0, s: 0 };
      const pause = async () => {
        await sleep(500);
        const [cpu0, at0] = [groupCpuMs(servicePid), performance.now()];
        await sleep(1_500);
        idle.ms += groupCpuMs(servicePid) - cpu0;
        idle.s += (performance.now() - at0) / 1000;
      };
      for (let round = 0; round < 2; round++) {
        messageRuns.push(await measured(() => outbound()));
        await pause();
        inboundRuns.push(profile && round === 0 ? await profiledWindow(servicePid, profile, profile, () => measured(webhook)) : await measured(webhook));
        if (profile && round === 0) {
          notes.push(
            `CPU profile of the service over round 1's webhooks: ${profile} (npx tsx bench/profile.ts ${profile} ${Math.round(inboundRuns[0]!.rps * durationS)})`,
          );
        }
        await pause();
      }
      const inboundRps = Math.max(...inboundRuns.map((r) => r.rps));
      const messagesRps = Math.max(...messageRuns.map((r) => r.rps));
      const mean = (list: Array<{ cpuUs: number }>) => list.reduce((sum, r) => sum + r.cpuUs, 0) / list.length;
      const inboundCpu = mean(inboundRuns);
      const messagesCpu = mean(messageRuns);
      const runs = (list: Array<{ rps: number; cpuUs: number; pgUs: number }>) =>
        list.map((r) => `${r.rps.toFixed(0)}/s ${r.cpuUs.toFixed(0)} µs (PostgreSQL ${r.pgUs.toFixed(0)} µs)`).join(', ');
      const idleMsPerS = idle.ms / idle.s;
      /** CPU a request less the service's idle CPU over the run (which weighs on each request the more, the lower the rate). */
      const net = (list: Array<{ rps: number; cpuUs: number }>) => mean(list.map((r) => ({ cpuUs: r.cpuUs - (idleMsPerS * 1000) / r.rps })));
      const cpuNote =
        `full speed (rate, service CPU a request, PostgreSQL's): signed webhooks ${runs(inboundRuns)}; POST /v1/messages ${runs(messageRuns)}; ` +
        `the service idle: ${idleMsPerS.toFixed(1)} ms of CPU a second, so net of idle ${net(inboundRuns).toFixed(0)} µs a signed webhook, ` +
        `${net(messageRuns).toFixed(0)} µs a POST /v1/messages; load average ${load0.toFixed(1)} -> ${loadAverage().toFixed(1)}`;
      log(cpuNote);
      notes.push(cpuNote);
      rows.push([
        'inbound webhooks at full speed vs POST /v1/messages',
        `${inboundRps.toFixed(0)}/s vs ${messagesRps.toFixed(0)}/s = ${(inboundRps / messagesRps).toFixed(2)}x`,
        '>= 0.8x',
        inboundRps >= 0.8 * messagesRps ? 'met' : 'missed',
      ]);
      rows.push([
        'service CPU a signed inbound (one text message; mean of the rounds) vs a POST /v1/messages with its delivery',
        `${inboundCpu.toFixed(0)} µs vs ${messagesCpu.toFixed(0)} µs (net of the idle service: ${net(inboundRuns).toFixed(0)} vs ${net(messageRuns).toFixed(0)} µs)`,
        'inbound <= 2,000 µs',
        inboundCpu <= 2000 ? 'met' : 'missed',
      ]);
    }

    // (2) Webhooks at a fixed 200/s.
    if (only.has('fixed')) {
      await waitForDrain(db);
      const fixed = await paced(200, durationS * 2, () => webhook());
      log(`webhooks at 200/s: p50 ${ms(pct(fixed.latencies, 50))}, p99 ${ms(pct(fixed.latencies, 99))}, ${fixed.errors} errors`);
      rows.push([
        'webhooks at a fixed 200/s: p50 / p99',
        `${ms(pct(fixed.latencies, 50))} / ${ms(pct(fixed.latencies, 99))}`,
        'p99 <= 250 ms',
        pct(fixed.latencies, 99) <= 250 ? 'met' : 'missed',
      ]);
    }

    // (3) Outbound at a fixed 100/s: from the 201 (as the client got it) to Graph's request.
    if (only.has('outbound')) {
      await waitForDrain(db);
      const answeredAt = new Map<string, number>();
      const latencyRun = `lat${stamp}`;
      const before = graph.requests.length;
      await paced(
        100,
        durationS * 2,
        (i) => outbound(`${latencyRun}-${i}`),
        (i, at) => answeredAt.set(`${latencyRun}-${i}`, at),
      );
      await waitForDrain(db);
      const toGraph: number[] = [];
      for (const request of graph.requests.slice(before)) {
        const id = templateOf(request.body)?.components?.[0]?.parameters?.[0]?.text;
        const at = id && answeredAt.get(id);
        if (at) toGraph.push(Math.max(0, request.at - at));
      }
      log(`outbound at 100/s: ${toGraph.length} sent, 201 -> Graph p50 ${ms(pct(toGraph, 50))}, p99 ${ms(pct(toGraph, 99))}`);
      rows.push([
        'outbound at a fixed 100/s: 201 -> Graph request, p50 / p99',
        `${ms(pct(toGraph, 50))} / ${ms(pct(toGraph, 99))}`,
        'p50 <= 50 ms, p99 <= 250 ms',
        pct(toGraph, 50) <= 50 && pct(toGraph, 99) <= 250 ? 'met' : 'missed',
      ]);
    }

    // (4) A backlog of 10,000 queued messages over 1,000 contacts, committed at once; Graph answers after 50 ms.
    if (only.has('backlog')) {
      await waitForDrain(db);
      graph.answer((request) => ({ ...sentAnswer(request), delayMs: 50 }));
      const drainFrom = graph.requests.length;
      const [serviceCpu0, machine0, load0] = [groupCpuMs(service.child.pid!), machineCpuMs(), loadAverage()];
      const committed = await backlog(db, key.workspaceId, channelId);
      await waitForDrain(db, 600_000);
      const [serviceCpu1, machine1, load1] = [groupCpuMs(service.child.pid!), machineCpuMs(), loadAverage()];
      const drained = graph.requests.slice(drainFrom).filter((r) => templateOf(r.body)?.name === 'backlog');
      const last = Math.max(...drained.map((r) => r.at));
      const drainRate = drained.length / ((last - committed) / 1000);
      const orderKept = checkOrder(drained);
      log(
        `backlog: ${drained.length} sent in ${((last - committed) / 1000).toFixed(1)} s = ${drainRate.toFixed(0)}/s, order per contact ${orderKept ? 'kept' : 'BROKEN'}`,
      );
      const busy = (machine1.busy - machine0.busy) / (machine1.total - machine0.total);
      const cpuNote =
        `backlog CPU: service ${(((serviceCpu1 - serviceCpu0) * 1000) / drained.length).toFixed(0)} µs a message; ` +
        `machine ${(busy * 100).toFixed(0)} % busy, load average ${load0.toFixed(1)} -> ${load1.toFixed(1)}`;
      log(cpuNote);
      notes.push(cpuNote);
      rows.push([
        `backlog of 10,000 over 1,000 contacts, Graph after 50 ms (DELIVERY_CONCURRENCY=${concurrency})`,
        `${drainRate.toFixed(0)}/s, order ${orderKept ? 'kept' : 'broken'}`,
        '>= 500/s, order kept',
        drainRate >= 500 && orderKept ? 'met' : 'missed',
      ]);
    }
    const warnings = service
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50'));
    if (warnings.length > 0) log(`service warnings (last ${warnings.length}):\n${warnings.slice(-10).join('\n')}`);

    await stopProcess(service.child);
  } finally {
    await graph.close();
    await stopAll();
    await drop();
    agent.destroy();
  }
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const machine = `BENCH_DURATION_S=${durationS}, DELIVERY_CONCURRENCY=${concurrency}, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('channels', `# Channels bench ${stamp}\n\n${machine}\n\n${table}\n\n${notes.join('\n')}\n`);
}

/** Waits until no delivery job is left (the cluster's recurring jobs stay). */
async function waitForDrain(db: Db, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from jobs where workspace_id <> ${NO_WORKSPACE}`.execute(db);
    if (rows[0]!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0]!.n} jobs still queued`);
    await sleep(100);
  }
}

/** 10,000 queued outbound template messages (10 per contact, in order) with their jobs, in one transaction; when it committed. */
async function backlog(db: Db, workspaceId: string, channelId: string): Promise<number> {
  await db.transaction().execute(async (trx) => {
    // Into the funnel's first stage, as the service opens a thread.
    await sql`insert into threads (workspace_id, id, contact_id, channel_id, stage_id, stage_entered_at, status, created_at, updated_at)
              select c.workspace_id, gen_random_uuid(), c.id, ${channelId}::uuid,
                     (select s.id from stages s where s.workspace_id = c.workspace_id order by s.position limit 1), now(), 'open', now(), now()
                from contacts c where c.workspace_id = ${workspaceId}
              on conflict do nothing`.execute(trx);
    await sql`insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, template, created_at)
              select t.workspace_id, gen_random_uuid(), t.id, t.contact_id, t.channel_id, 'outbound', '[template backlog]', 'queued',
                     jsonb_build_object('name', 'backlog', 'language', 'pt_BR', 'parameters', jsonb_build_array(c.phone, k::text)),
                     clock_timestamp() + k * interval '1 millisecond'
                from threads t join contacts c on c.workspace_id = t.workspace_id and c.id = t.contact_id,
                     generate_series(1, 10) k
               where t.workspace_id = ${workspaceId} and t.channel_id = ${channelId} and t.status = 'open'`.execute(trx);
    await sql`insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
              select m.workspace_id, gen_random_uuid(), 'message-delivery', m.channel_id || ':' || m.contact_id,
                     jsonb_build_object('messageId', m.id), now(), m.created_at
                from messages m where m.workspace_id = ${workspaceId} and m.content = '[template backlog]' and m.status = 'queued'`.execute(trx);
    await sql`select pg_notify('sf_jobs', 'message-delivery')`.execute(trx);
  });
  return Date.now();
}

/** Whether each contact's backlog reached Graph in its order (parameters: phone, then 1..10). */
function checkOrder(requests: GraphDouble['requests']): boolean {
  const byPhone = new Map<string, number[]>();
  for (const r of requests) {
    const [phone, k] = (templateOf(r.body)?.components?.[0]?.parameters ?? []).map((p) => p.text);
    byPhone.set(phone!, [...(byPhone.get(phone!) ?? []), Number(k)]);
  }
  return [...byPhone.values()].every((ks) => ks.length === 10 && ks.every((k, i) => k === i + 1));
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:channels failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
