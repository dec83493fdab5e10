// npm run bench:sla-rates: inbound and outbound message rates with SLA policies on against the same
// rates without, in one run of the service as shipped (production mode, its own PostgreSQL database,
// Redis, a Graph double in this process). Closed loop at full speed: signed WhatsApp webhook POSTs
// (each customer's first message opens a thread), then POST /v1/messages text answers to the same
// customers (each one stops a response clock). Without policies the clocks still run (the report's
// metric rows); with them, 3 enabled policies match every thread (all three targets, one in business
// hours, warnings): due times, timers and sla.* state on every opening, message and answer. Each
// round runs both modes on fresh customers (so every thread opens under the mode measured), taking
// turns at going first (off in odd rounds, on in even ones: neither always runs on the rows the
// other left); the ratio is of the best round of each mode (each round's own ratio printed beside
// it), with the service's and PostgreSQL's CPU a request (all the server's processes: much of the
// policies' cost is the server's). Target: >= 0.9x for both. Each mode's round starts after a
// VACUUM (ANALYZE) of the bench's database, as autovacuum would have done (this machine's
// PostgreSQL runs without it), and prints the dead rows it found: without it every round inherited
// the dead rows of all the rounds before (each message updates its thread, each answer adds and
// deletes a delivery job), PostgreSQL's CPU a request grew round after round in both modes, and the
// policies' round, always second of its pair then, ran on more of them than the round it was
// compared with. BENCH_SLA_VACUUM=0 leaves the VACUUM out (still printing the dead rows).
// BENCH_SLA_PROFILE=<prefix> writes CPU profiles of the service over the first measured round of
// each mode, inbound and outbound apart (<prefix>-<off|on>-<inbound|outbound>.cpuprofile;
// bench/profile.ts reads them).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { GraphDouble, metaSignature, sentAnswer, whatsappDelivery, whatsappText } from '../test/helpers/graph.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, durationS, fullSpeed, log, post, profiledWindow, stamp, startBenchService } from './lib/service-bench.js';
import { groupCpuMs, pidsCpuMs, postgresPids } from './lib/cpu.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS || 2);

const CONTACTS = 500;
/** BENCH_SLA_PROFILE=<prefix>: CPU profiles of the first measured round of each mode (bench/cpu-profile-hook.ts). */
const profile = process.env.BENCH_SLA_PROFILE ? path.resolve(process.env.BENCH_SLA_PROFILE) : undefined;
const profileFile = profile && `${profile}.cpuprofile`;

const { databaseUrl, db, drop } = await benchDatabase('sla_rates', 4);

const VACUUM = process.env.BENCH_SLA_VACUUM !== '0';

/** The tables with dead rows (over 1,000), then (unless BENCH_SLA_VACUUM=0) a VACUUM (ANALYZE) of the database, outside any transaction. */
async function vacuumed(): Promise<Record<string, number>> {
  const { rows } = await sql<{ relname: string; n_dead_tup: number }>`
    select relname, n_dead_tup::int from pg_stat_user_tables where n_dead_tup > 1000 order by n_dead_tup desc`.execute(db);
  if (!VACUUM) return Object.fromEntries(rows.map((row) => [row.relname, row.n_dead_tup]));
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let backend: number | undefined;
  try {
    backend = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    await client.query('vacuum (analyze)');
  } finally {
    await client.end();
  }
  // Its backend gone before the round samples PostgreSQL's processes: one that exits during the
  // round takes the VACUUM's CPU out of the sum (a negative CPU a request).
  for (let i = 0; i < 100 && backend !== undefined && fs.existsSync(`/proc/${backend}`); i++) await sleep(20);
  return Object.fromEntries(rows.map((row) => [row.relname, row.n_dead_tup]));
}
const graph = await GraphDouble.start();
try {
  await migrateToLatest(db);
  const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
  const service = await startBenchService(
    'sla-rates',
    {
      DATABASE_URL: databaseUrl,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      META_GRAPH_URL: graph.url,
      ...(profileFile && { BENCH_CPU_PROFILE: profileFile }),
    },
    profileFile ? ['--import', './bench/cpu-profile-hook.ts'] : [],
  );
  const { base } = service;
  const auth = { authorization: `Bearer ${key.apiKey}` };
  const meta = { externalId: '106540352242922', accessToken: 'EAAbench', appSecret: randomBytes(16).toString('hex'), verifyToken: 'v' };
  const created = await post(`${base}/v1/channels`, JSON.stringify({ type: 'whatsapp', name: 'Bench', provider: 'meta', meta }), auth);
  const channelId = (JSON.parse(created.body) as { id: string }).id;
  graph.answer((request) => sentAnswer(request));
  const policyIds: string[] = [];
  for (const [i, body] of [
    { name: 'Primeira resposta', targets: { firstResponseMinutes: 15, nextResponseMinutes: 30, resolutionMinutes: 1440 }, warnBeforeMinutes: 5 },
    { name: 'Horário comercial', targets: { firstResponseMinutes: 60, resolutionMinutes: 2880 }, businessHoursOnly: true, warnBeforeMinutes: 10 },
    { name: 'Só pessoas', targets: { nextResponseMinutes: 120 }, humanOnly: true },
  ].entries()) {
    const res = await post(`${base}/v1/sla-policies`, JSON.stringify({ ...body, enabled: false, position: i + 1 }), auth);
    if (res.status !== 201) throw new Error(`policy: ${res.status} ${res.body}`);
    policyIds.push((JSON.parse(res.body) as { id: string }).id);
  }
  const setPolicies = async (enabled: boolean) => {
    for (const id of policyIds) {
      const res = await post(`${base}/v1/sla-policies/${id}`, JSON.stringify({ enabled }), auth, 'PATCH');
      if (res.status !== 200) throw new Error(`policy: ${res.status} ${res.body}`);
    }
  };

  let set = 0;
  let seq = 0;
  /** A round on CONTACTS fresh customers: inbound, then answers to them. */
  /** Runs `load` under the service's CPU profiler when `name` is given; the profile goes to <prefix>-<name>.cpuprofile. */
  const profiled = async <T>(name: string | undefined, load: () => Promise<T>): Promise<T> => {
    if (!profileFile || !name) return load();
    const result = await profiledWindow(service.child.pid!, profileFile, `${profile}-${name}.cpuprofile`, load);
    log(`CPU profile: ${profile}-${name}.cpuprofile`);
    return result;
  };
  const round = async (profileAs?: string) => {
    const prefix = `+55119${String(set++).padStart(2, '0')}`;
    await sql`insert into contacts (workspace_id, id, name, phone, created_at, updated_at)
              select ${key.workspaceId}::uuid, gen_random_uuid(), 'Contato ' || n, ${prefix} || lpad(n::text, 6, '0'), now(), now()
                from generate_series(1, ${CONTACTS}) n`.execute(db);
    const contacts = (
      await sql<{
        id: string;
        phone: string;
      }>`select id, phone from contacts where workspace_id = ${key.workspaceId} and phone like ${`${prefix}%`} order by phone`.execute(db)
    ).rows;
    const deadRowsAtStart = await vacuumed();
    let n = 0;
    const postgres = postgresPids();
    const pg0 = pidsCpuMs(postgres);
    const cpu0 = groupCpuMs(service.child.pid!);
    const inbound = await profiled(profileAs && `${profileAs}-inbound`, () =>
      fullSpeed(durationS, 50, () => {
        const i = seq++;
        const body = JSON.stringify(
          whatsappDelivery(
            meta.externalId,
            whatsappText(contacts[n++ % contacts.length]!.phone.slice(1), `Mensagem ${i}`, 'Cliente', `wamid.sla.${stamp}.${i}`),
          ),
        );
        return { url: `${base}/webhooks/meta/${channelId}`, body, headers: { 'x-hub-signature-256': metaSignature(meta.appSecret, body) } };
      }),
    );
    const cpu1 = groupCpuMs(service.child.pid!);
    const pg1 = pidsCpuMs(postgres);
    await sleep(1_000);
    const pg1b = pidsCpuMs(postgres);
    let m = 0;
    const outbound = await profiled(profileAs && `${profileAs}-outbound`, () =>
      fullSpeed(durationS, 50, () => ({
        url: `${base}/v1/messages`,
        body: JSON.stringify({ contactId: contacts[m++ % contacts.length]!.id, channelId, content: `Resposta ${m}` }),
        headers: auth,
      })),
    );
    const cpu2 = groupCpuMs(service.child.pid!);
    const pg2 = pidsCpuMs(postgres);
    await sleep(1_000);
    return {
      inbound: inbound.rps,
      outbound: outbound.rps,
      errors: inbound.errors + outbound.errors,
      inboundCpuUs: ((cpu1 - cpu0) * 1000) / Math.max(1, inbound.done),
      outboundCpuUs: ((cpu2 - cpu1) * 1000) / Math.max(1, outbound.done),
      inboundPostgresCpuUs: ((pg1 - pg0) * 1000) / Math.max(1, inbound.done),
      outboundPostgresCpuUs: ((pg2 - pg1b) * 1000) / Math.max(1, outbound.done),
      deadRowsAtStart,
    };
  };

  await round(); // warm-up, policies off
  const results: Record<'off' | 'on', Array<Awaited<ReturnType<typeof round>>>> = { off: [], on: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const mode of r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      await setPolicies(mode === 'on');
      const result = await round(r === 0 ? mode : undefined);
      results[mode].push(result);
      log(JSON.stringify({ round: r + 1, policies: mode, ...result, loadAverage: os.loadavg()[0]!.toFixed(2) }));
    }
  }
  const timed = await sql<{ n: number }>`select count(*)::int as n from sla_clocks where workspace_id = ${key.workspaceId} and due_at is not null`.execute(db);
  const best = (mode: 'off' | 'on', k: 'inbound' | 'outbound') => Math.max(...results[mode].map((x) => x[k]));
  for (const k of ['inbound', 'outbound'] as const) {
    const ratio = best('on', k) / best('off', k);
    log(
      JSON.stringify({
        rate: k,
        withoutPolicies: +best('off', k).toFixed(1),
        withPolicies: +best('on', k).toFixed(1),
        ratio: +ratio.toFixed(3),
        target: '>= 0.9',
        met: ratio >= 0.9,
        // Each round's pair (off, then on, close in time): the spread of the best-of-rounds ratio.
        perRound: results.on.map((x, i) => +(x[k] / results.off[i]![k]).toFixed(2)),
        cpuUsPerRequest: {
          off: Math.round(Math.min(...results.off.map((x) => x[`${k}CpuUs`]))),
          on: Math.round(Math.min(...results.on.map((x) => x[`${k}CpuUs`]))),
        },
        postgresCpuUsPerRequest: {
          off: Math.round(Math.min(...results.off.map((x) => x[`${k}PostgresCpuUs`]))),
          on: Math.round(Math.min(...results.on.map((x) => x[`${k}PostgresCpuUs`]))),
        },
        loadAverage: os.loadavg()[0]!.toFixed(2),
      }),
    );
  }
  log(JSON.stringify({ clocksWithDueTimesAtTheEnd: timed.rows[0]!.n }));
  await stopProcess(service.child);
} finally {
  await graph.close();
  await stopAll();
  await drop();
  agent.destroy();
}
