// npm run bench:idle: issue 34's targets for thread.idle timers at scale, against the service as
// shipped (production mode, a child process, a scratch database on DATABASE_URL's PostgreSQL server,
// else BENCH_DATABASE_URL's, else postgres://root@127.0.0.1:5432/postgres; Redis). Threads are seeded
// by bulk SQL (a contact, an open thread and our last message each, as the service writes them);
// the automations are made through the API, so the service schedules the timers itself.
// (1) Firing: BENCH_IDLE_DUE (10,000) open threads whose last message (ours) is 10 minutes old;
//     then a 1-minute `thread.idle` (waitingOn customer) automation that closes the thread is
//     created: its creation schedules a timer per silence, each already due, so all fall due
//     together when it commits. Target: every one fires (its run recorded, the thread closed)
//     within 20 s of the automation's answer. Also the service's CPU a timer (/proc).
// (2) Scheduling at scale: BENCH_IDLE_THREADS (100,000) open threads in another workspace; creating
//     a 30-day idle automation (a timer per silence), disabling it (its timers deleted) and enabling
//     it again must answer 2xx under the service's statement timeout (DATABASE_STATEMENT_TIMEOUT_MS,
//     10 s by default), with a timer per thread after each scheduling.
// BENCH_IDLE_ONLY=fire,schedule picks measurements; BENCH_IDLE_PROFILE=<file> profiles the service over (1).
// Exits 1 when a target is missed. Prints a table and writes bench/results/runs/idle-<stamp>.md (BENCH_RESULTS_DIR).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES, type Provisioned } from '../src/provisioning.js';
import { createScratchDatabase } from '../scripts/lib/real-server.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { agent, log, post, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const serverUrl = process.env.DATABASE_URL || process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
const dueTimers = Number(process.env.BENCH_IDLE_DUE || 10_000);
const threadsAtScale = Number(process.env.BENCH_IDLE_THREADS || 100_000);
const fireWithinS = 20;
/** BENCH_IDLE_PROFILE=<file>: a CPU profile of the service while the timers of (1) fire (npx tsx bench/profile.ts <file>). */
const profile = process.env.BENCH_IDLE_PROFILE ? path.resolve(process.env.BENCH_IDLE_PROFILE) : undefined;
/** Which measurements to run (default both): fire, schedule. */
const only = new Set((process.env.BENCH_IDLE_ONLY || 'fire,schedule').split(','));

type Row = [what: string, result: string, target: string, met: string];
const rows: Row[] = [];
let missed = false;
function check(what: string, result: string, target: string, met: boolean | undefined): void {
  if (met === false) missed = true;
  rows.push([what, result, target, met === undefined ? '' : met ? 'met' : '**missed**']);
}

interface Api {
  base: string;
  auth: Record<string, string>;
}

/** The call's status, answer and how long it took (ms). */
async function timed<T>(api: Api, method: string, path: string, body?: unknown): Promise<{ status: number; body: T; ms: number }> {
  const t0 = performance.now();
  const answer = await post(`${api.base}/v1${path}`, body === undefined ? '' : JSON.stringify(body), api.auth, method);
  return { status: answer.status, body: (answer.body ? JSON.parse(answer.body) : undefined) as T, ms: performance.now() - t0 };
}

/** `n` open threads of the workspace's WhatsApp sandbox channel, each with a contact and our last message, `minutesAgo` old. */
async function seedSilences(db: Db, key: Provisioned, n: number, minutesAgo: number): Promise<number> {
  const t0 = performance.now();
  const channelId = key.channels.find((ch) => ch.type === 'whatsapp')!.id;
  const { rows: stage } = await sql<{ id: string }>`
    select id from stages where workspace_id = ${key.workspaceId} order by position limit 1`.execute(db);
  for (let done = 0; done < n; done += 25_000) {
    const batch = Math.min(25_000, n - done);
    await sql`
      with c as (
        insert into contacts (workspace_id, id, name, created_at, updated_at)
        select ${key.workspaceId}::uuid, gen_random_uuid(), 'Contato ' || (${done} + g), now() - interval '1 hour', now() - interval '1 hour'
          from generate_series(1, ${batch}) g
        returning id
      ), t as (
        insert into threads (workspace_id, id, contact_id, channel_id, stage_id, stage_entered_at, status, last_message_at, created_at, updated_at)
        select ${key.workspaceId}::uuid, gen_random_uuid(), c.id, ${channelId}::uuid, ${stage[0]!.id}::uuid, now() - interval '1 hour', 'open',
               now() - ${minutesAgo}::int * interval '1 minute', now() - interval '1 hour', now() - interval '1 hour'
          from c
        returning id, contact_id
      )
      insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, created_at)
      select ${key.workspaceId}::uuid, gen_random_uuid(), t.id, t.contact_id, ${channelId}::uuid, 'outbound', 'Podemos ajudar em algo mais?', 'delivered',
             now() - ${minutesAgo}::int * interval '1 minute'
        from t`.execute(db);
  }
  await sql`analyze`.execute(db);
  return performance.now() - t0;
}

async function count(db: Db, query: ReturnType<typeof sql<{ n: number }>>): Promise<number> {
  const { rows: r } = await query.execute(db);
  return r[0]!.n;
}

async function main(): Promise<void> {
  const scratch = await createScratchDatabase(serverUrl, 'sf_bench_idle');
  const db = createDatabase({ databaseUrl: scratch.url, pgliteDir: 'memory://', poolSize: 2 });
  const load0 = loadAverage();
  try {
    await migrateToLatest(db);
    const keyFire = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench idle firing' });
    const keyScale = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench idle at scale' });
    const service = await startBenchService(
      'idle',
      { DATABASE_URL: scratch.url, SECRETS_KEY: randomBytes(32).toString('base64'), ...(profile && { BENCH_CPU_PROFILE: profile }) },
      profile ? ['--import', './bench/cpu-profile-hook.ts'] : [],
    );
    const servicePid = service.child.pid!;
    const apiOf = (key: Provisioned): Api => ({ base: service.base, auth: { authorization: `Bearer ${key.apiKey}` } });

    if (only.has('fire')) {
      const api = apiOf(keyFire);
      const seedMs = await seedSilences(db, keyFire, dueTimers, 10);
      log(`(1) ${dueTimers.toLocaleString('en-US')} silences seeded in ${(seedMs / 1000).toFixed(1)} s`);
      await sleep(1_000);
      if (profile) process.kill(servicePid, 'SIGUSR2');
      const cpu0 = groupCpuMs(servicePid);
      const created = await timed<{ id: string }>(api, 'POST', '/automations', {
        name: 'Encerrar sem resposta',
        trigger: { event: 'thread.idle', minutes: 1, waitingOn: 'customer' },
        actions: [{ type: 'set_status', status: 'closed' }],
      });
      if (created.status !== 201) throw new Error(`POST /automations answered ${created.status}`);
      const answeredAt = performance.now();
      const runs = sql<{
        n: number;
      }>`select count(*)::int as n from automation_runs where workspace_id = ${keyFire.workspaceId} and automation_id = ${created.body.id}`;
      let fired = 0;
      let allFiredMs = Infinity;
      const progress: string[] = [];
      const deadline = answeredAt + Math.max(120, fireWithinS * 4) * 1000;
      for (let tick = 1; performance.now() < deadline; tick++) {
        await sleep(250);
        fired = await count(db, runs);
        if (tick % 20 === 0) progress.push(`${((performance.now() - answeredAt) / 1000).toFixed(0)} s: ${fired}`);
        if (fired >= dueTimers) {
          allFiredMs = performance.now() - answeredAt;
          break;
        }
      }
      const cpuUs = ((groupCpuMs(servicePid) - cpu0) * 1000) / Math.max(1, fired);
      if (profile) {
        process.kill(servicePid, 'SIGUSR2');
        for (let i = 0; i < 300 && !fs.existsSync(profile); i++) await sleep(100);
        log(`CPU profile of the service while the timers fired: ${profile} (npx tsx bench/profile.ts ${profile})`);
      }
      const closed = await count(
        db,
        sql<{ n: number }>`select count(*)::int as n from threads where workspace_id = ${keyFire.workspaceId} and status = 'closed'`,
      );
      const { rows: span } = await sql<{ first_s: number; last_s: number }>`
        select extract(epoch from min(r.created_at) - a.created_at)::float8 as first_s, extract(epoch from max(r.created_at) - a.created_at)::float8 as last_s
          from automation_runs r join automations a on a.workspace_id = r.workspace_id and a.id = r.automation_id
         where r.workspace_id = ${keyFire.workspaceId} and r.automation_id = ${created.body.id} group by a.created_at`.execute(db);
      log(`(1) fired so far, by time: ${progress.join(', ')}`);
      check(
        `(1) ${dueTimers.toLocaleString('en-US')} thread.idle timers due together (a 1-minute rule that closes the thread, created over silences 10 minutes old): all fired, from the automation's answer`,
        `**${Number.isFinite(allFiredMs) ? `${(allFiredMs / 1000).toFixed(1)} s` : `not all: ${fired} fired`}** (${(dueTimers / (allFiredMs / 1000)).toFixed(0)}/s; runs recorded ${span[0]?.first_s.toFixed(1)} to ${span[0]?.last_s.toFixed(1)} s after the automation's created_at), ${closed} threads closed`,
        `all within ${fireWithinS} s`,
        fired === dueTimers && closed === dueTimers && allFiredMs <= fireWithinS * 1000,
      );
      rows.push([
        '(1) the same: POST /automations (schedules the timers) took; service CPU a timer (scheduling and firing)',
        `${created.ms.toFixed(0)} ms; ${cpuUs.toFixed(0)} µs`,
        '',
        '',
      ]);
    }

    if (only.has('schedule')) {
      const api = apiOf(keyScale);
      const seedMs = await seedSilences(db, keyScale, threadsAtScale, 10);
      log(`(2) ${threadsAtScale.toLocaleString('en-US')} silences seeded in ${(seedMs / 1000).toFixed(1)} s`);
      const timers = sql<{ n: number }>`select count(*)::int as n from jobs where workspace_id = ${keyScale.workspaceId} and queue = 'automation-idle'`;
      const created = await timed<{ id: string }>(api, 'POST', '/automations', {
        name: 'Encerrar após 30 dias sem resposta',
        trigger: { event: 'thread.idle', minutes: 43_200, waitingOn: 'customer' },
        actions: [{ type: 'set_status', status: 'closed' }],
      });
      const afterCreate = await count(db, timers);
      const steps: Array<{ what: string; status: number; ms: number; timers: number; expected: number }> = [
        { what: 'POST (create, enabled)', status: created.status, ms: created.ms, timers: afterCreate, expected: threadsAtScale },
      ];
      if (created.status === 201) {
        const disabled = await timed(api, 'PATCH', `/automations/${created.body.id}`, { enabled: false });
        steps.push({ what: 'PATCH enabled false', status: disabled.status, ms: disabled.ms, timers: await count(db, timers), expected: 0 });
        const enabled = await timed(api, 'PATCH', `/automations/${created.body.id}`, { enabled: true });
        steps.push({ what: 'PATCH enabled true', status: enabled.status, ms: enabled.ms, timers: await count(db, timers), expected: threadsAtScale });
      }
      for (const step of steps) log(`(2) ${step.what}: ${step.status} in ${(step.ms / 1000).toFixed(1)} s, ${step.timers} timers`);
      check(
        `(2) an idle rule over ${threadsAtScale.toLocaleString('en-US')} open threads: created / disabled / enabled again (answer, time, timers after)`,
        steps.map((s) => `${s.what}: ${s.status} in **${(s.ms / 1000).toFixed(1)} s**, ${s.timers.toLocaleString('en-US')}`).join('; '),
        'each 2xx with a timer per silence (none when disabled)',
        steps.length === 3 && steps.every((s) => s.status >= 200 && s.status < 300 && s.timers === s.expected),
      );
    }

    const warnings = service
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50'));
    if (warnings.length > 0) log(`service warnings (last ${Math.min(10, warnings.length)} of ${warnings.length}):\n${warnings.slice(-10).join('\n')}`);
    await stopProcess(service.child);
  } finally {
    await stopAll();
    await db.destroy();
    await scratch.drop();
    agent.destroy();
  }
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const settings =
    `BENCH_IDLE_DUE=${dueTimers}, BENCH_IDLE_THREADS=${threadsAtScale}; ${os.cpus().length} cores, ` +
    `load average ${load0.toFixed(1)} at the start, ${loadAverage().toFixed(1)} at the end, Node ${process.version}`;
  log(settings);
  writeReport('idle', `# Idle timers bench ${stamp}\n\n${settings}\n\n${table}\n`);
  if (missed) process.exitCode = 1;
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:idle failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
