// npm run bench:automations: issue 22's targets for automations that run, against the service as
// shipped (production mode, a child process, a scratch database on DATABASE_URL's PostgreSQL server,
// else BENCH_DATABASE_URL's, else postgres://root@127.0.0.1:5432/postgres; Redis), with a Graph
// double in this process. Three workspaces:
// - A: a Meta WhatsApp channel and 20 enabled `message.received` automations, 19 whose
//   `message.content` conditions never hold and, last in position order (so all 20 are evaluated),
//   one that holds and moves the thread to "Em atendimento" and labels it (BENCH_AUTOMATIONS_MATCHING=label:
//   only labels it, the workload issue 34 names). Signed webhooks, each from a new phone (a new
//   contact and thread, so the matching run changes something every time).
//   (1) At a fixed BENCH_AUTOMATIONS_RATE (100/s) for BENCH_AUTOMATIONS_SECONDS (30): the webhook
//   POST leaving this process -> the commit of the run's transaction, seen by this process as the
//   NOTIFY PostgreSQL sends at that commit (`events_added`, sent by the event log's `stream` consumer,
//   whose payload is the transaction's id, matched to the xmin of the run's `automation.run` event, or,
//   when the service counted every run of the window inline (sf_automations_inline_total), to its
//   message's: an inline run commits with it; an open event stream holds the workspace's lease so that
//   it notifies); also the DB times: the stage move's
//   thread_history created_at minus the inbound message's created_at (both the service's clock).
//   (2) Closed loop as bench:channels measures ingest (50 connections, BENCH_DURATION_S each): none
//   enabled, the 20 enabled (one matching every message), the 20 enabled and no message matching,
//   rotated, BENCH_AUTOMATIONS_ROUNDS rounds; the CPU of the service a webhook, its runs included.
//   The target (issue 34) counts each run until its automation jobs are done: webhooks / (window + drain).
// - C: 100,000 (BENCH_AUTOMATIONS_PENDING) pending thread.idle timers, written by bulk SQL as
//   triggers.ts writes them (queue automation-idle, key idle:<thread>, due in 1 to 30 days, for a
//   real 30-day idle automation of C; their thread and message ids are made up: they never fall due
//   during the bench). claim_jobs for automation-idle, as a worker calls it, timed and EXPLAINed
//   with nothing due and with some due (20 due timers inserted in a transaction rolled back after),
//   at a tenth of the pending count and at all of it.
// - B: (3) BENCH_AUTOMATIONS_DUE (1,000) real sandbox threads (a customer's message each), then our
//   answer to each (POST /v1/messages) spread over BENCH_AUTOMATIONS_SPREAD_S (60 s), with a 1-minute
//   `thread.idle` (waitingOn customer) automation that closes the thread: the service schedules each
//   timer itself (due = the answer's createdAt + 1 min), beside the 100,000 pending ones. Lateness =
//   the run's automation_runs.created_at - due.
// Exits 1 when a target is missed. Prints a table and writes bench/results/runs/automations-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type pg from 'pg';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES, type Provisioned } from '../src/provisioning.js';
import { createScratchDatabase } from '../scripts/lib/real-server.js';
import { GraphDouble, metaSignature, sentAnswer, whatsappDelivery, whatsappText } from '../test/helpers/graph.js';
import { groupCpuMs, loadAverage, machineCpuMs, pidsCpuMs, postgresPids } from './lib/cpu.js';
import { connectClient } from './lib/pg-client.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { median } from './lib/report.js';
import { agent, durationS, fullSpeed, log, ms, pct, post, profiledWindow, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const serverUrl = process.env.DATABASE_URL || process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
/** Three, so that with three modes rotated each mode runs once first, once second and once last (runs speed up as the service warms, or slow as dead rows pile up without autovacuum). */
const rounds = Number(process.env.BENCH_AUTOMATIONS_ROUNDS || 3);
const rate = Number(process.env.BENCH_AUTOMATIONS_RATE || 100);
const latencySeconds = Number(process.env.BENCH_AUTOMATIONS_SECONDS || 30);
const pendingTimers = Number(process.env.BENCH_AUTOMATIONS_PENDING || 100_000);
const dueTimers = Number(process.env.BENCH_AUTOMATIONS_DUE || 1_000);
const spreadS = Number(process.env.BENCH_AUTOMATIONS_SPREAD_S || 60);
/**
 * BENCH_AUTOMATIONS_PROFILE=<file>.cpuprofile: a CPU profile of the service over run (1), and one of each mode's last ingest
 * run (<file>-ingest-<mode>.cpuprofile); bench/profile.ts reads them.
 */
const profile = process.env.BENCH_AUTOMATIONS_PROFILE ? path.resolve(process.env.BENCH_AUTOMATIONS_PROFILE) : undefined;
/**
 * VACUUM ANALYZE the scratch database before each ingest run of (2) and before run (1), as
 * autovacuum would have meanwhile on a default server (this one may run with autovacuum off, and
 * then each run inherits the dead rows of those before it: the later a run, the slower);
 * BENCH_AUTOMATIONS_VACUUM=0 skips it.
 */
const vacuumFirst = process.env.BENCH_AUTOMATIONS_VACUUM !== '0';
/**
 * What the matching automation does: `stage-and-label` (default: moves the thread to "Em atendimento"
 * and labels it, the heavier of the two, as every earlier sitting measured) or `label` (only labels
 * the thread: the workload issue 34 names, "one matching every message, adding a thread label").
 */
const matchingActions = process.env.BENCH_AUTOMATIONS_MATCHING === 'label' ? 'label' : 'stage-and-label';
/** Which measurements to run (default all): ingest, latency, timers. */
const only = new Set((process.env.BENCH_AUTOMATIONS_ONLY || 'ingest,latency,timers').split(','));

type Row = [what: string, result: string, target: string, met: string];
const rows: Row[] = [];
const notes: string[] = [];
let missed = false;
function check(what: string, result: string, target: string, met: boolean | undefined): void {
  if (met === false) missed = true;
  rows.push([what, result, target, met === undefined ? '' : met ? 'met' : '**missed**']);
}
const note = (line: string): void => {
  log(line);
  notes.push(line);
};

interface Api {
  base: string;
  auth: Record<string, string>;
}

async function call<T>(api: Api, method: string, path: string, body?: unknown): Promise<T> {
  const answer = await post(`${api.base}/v1${path}`, body === undefined ? '' : JSON.stringify(body), api.auth, method);
  if (answer.status < 200 || answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.body}`);
  return (answer.body ? JSON.parse(answer.body) : undefined) as T;
}

/** Jobs of `queue` left in the workspace. */
async function jobsLeft(db: Db, workspaceId: string, queue: string): Promise<number> {
  const { rows: r } = await sql<{ n: number }>`select count(*)::int as n from jobs where workspace_id = ${workspaceId} and queue = ${queue}`.execute(db);
  return r[0]!.n;
}

/** The service's count of customers' messages' runs by outcome (sf_automations_inline_total: inline, behind, failed). */
async function inlineRuns(base: string): Promise<Map<string, number>> {
  const answer = await post(`${base}/metrics`, '', {}, 'GET');
  const counts = new Map<string, number>();
  for (const [, outcome, value] of answer.body.matchAll(/^sf_automations_inline_total\{outcome="(\w+)"\} (\d+)/gm)) counts.set(outcome!, Number(value));
  return counts;
}

/** The tables a customer's message and its automations write, counted by bench (2). */
const WRITTEN = ['contacts', 'threads', 'thread_history', 'sla_clocks', 'messages', 'events', 'automation_runs'] as const;

/**
 * What PostgreSQL has written so far: the WAL's insert position (bytes) and the rows of WRITTEN in
 * the workspace. Counts, unlike CPU: the same on a busy machine as on a quiet one.
 */
async function written(db: Db, workspaceId: string): Promise<{ walBytes: number; rows: Record<string, number> }> {
  const counts = WRITTEN.map((table) => sql`(select count(*) from ${sql.table(table)} where workspace_id = ${workspaceId})::int as ${sql.ref(table)}`);
  const { rows: r } = await sql<Record<string, number> & { wal: string }>`
    select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text as wal, ${sql.join(counts)}`.execute(db);
  const { wal, ...rows } = r[0]!;
  return { walBytes: Number(wal), rows };
}

/** Waits until the workspace's automation-event jobs are all done; how long it took (ms). */
async function drained(db: Db, workspaceId: string, timeoutMs = 300_000): Promise<number> {
  const started = Date.now();
  while ((await jobsLeft(db, workspaceId, 'automation-event')) > 0) {
    if (Date.now() - started > timeoutMs) throw new Error('automation-event jobs still queued');
    await sleep(50);
  }
  return Date.now() - started;
}

async function main(): Promise<void> {
  const scratch = await createScratchDatabase(serverUrl, 'sf_bench_automations');
  const db = createDatabase({ databaseUrl: scratch.url, pgliteDir: 'memory://', poolSize: 4 });
  const graph = await GraphDouble.start();
  graph.answer((request) => sentAnswer(request));
  const load0 = loadAverage();
  const machine0 = machineCpuMs();
  let probe: pg.Client | undefined;
  let stream: http.ClientRequest | undefined;
  try {
    await migrateToLatest(db);
    const keyA = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench automations' });
    const keyB = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench idle timers' });
    const keyC = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench pending timers' });
    const service = await startBenchService(
      'automations',
      {
        DATABASE_URL: scratch.url,
        SECRETS_KEY: randomBytes(32).toString('base64'),
        META_GRAPH_URL: graph.url,
        ...(profile && { BENCH_CPU_PROFILE: profile }),
      },
      profile ? ['--import', './bench/cpu-profile-hook.ts'] : [],
    );
    const servicePid = service.child.pid!;
    const apiOf = (key: Provisioned): Api => ({ base: service.base, auth: { authorization: `Bearer ${key.apiKey}` } });
    const [a, b, c] = [apiOf(keyA), apiOf(keyB), apiOf(keyC)];

    // Workspace A: the Meta channel and the 20 automations.
    const meta = { externalId: `1065${Date.now() % 1e9}`, accessToken: 'EAAbench', appSecret: randomBytes(16).toString('hex'), verifyToken: 'v' };
    const channel = await call<{ id: string }>(a, 'POST', '/channels', { type: 'whatsapp', name: 'Bench', provider: 'meta', meta });
    const stages = await call<{ data: Array<{ id: string; name: string }> }>(a, 'GET', '/stages');
    const emAtendimento = stages.data.find((s) => s.name === 'Em atendimento')!.id;
    const automationIds: string[] = [];
    for (let k = 1; k <= 19; k++) {
      const created = await call<{ id: string }>(a, 'POST', '/automations', {
        name: `Nunca ${k}`,
        trigger: { event: 'message.received' },
        conditions: {
          any: [
            { field: 'message.content', operator: 'contains', value: `palavra-que-ninguem-usa-${k}` },
            { field: 'message.content', operator: 'starts_with', value: `cancelar ${k}` },
          ],
        },
        actions: [{ type: 'add_labels', target: 'thread', labels: [`nunca-${k}`] }],
      });
      automationIds.push(created.id);
    }
    const matching = await call<{ id: string }>(a, 'POST', '/automations', {
      name: 'Pedidos',
      trigger: { event: 'message.received' },
      conditions: { any: [{ field: 'message.content', operator: 'contains', value: 'pedido' }] },
      actions: [
        ...(matchingActions === 'stage-and-label' ? [{ type: 'move_stage' as const, stageId: emAtendimento }] : []),
        { type: 'add_labels', target: 'thread', labels: ['pedido'] },
      ],
    });
    automationIds.push(matching.id);
    const setEnabled = async (enabled: boolean) => {
      for (const id of automationIds) await call(a, 'PATCH', `/automations/${id}`, { enabled });
    };

    let seq = 0;
    /** A signed WhatsApp delivery of one text message from a new phone (a new contact and thread). */
    const webhook = (content = 'Oi, quero saber do meu pedido') => {
      const n = seq++;
      const phone = `55119${String(n).padStart(8, '0')}`;
      const inbound = whatsappText(phone, content, `Cliente ${n}`, `wamid.bench.${stamp}.${n}`);
      const body = JSON.stringify(whatsappDelivery(meta.externalId, { messages: inbound.messages, contacts: inbound.contacts }));
      return { url: `${service.base}/webhooks/meta/${channel.id}`, body, headers: { 'x-hub-signature-256': metaSignature(meta.appSecret, body) } };
    };

    // Warm-up, automations on.
    await fullSpeed(2, 20, () => webhook());
    await drained(db, keyA.workspaceId);

    // (2) Ingest with none enabled against with the 20, alternating.
    if (only.has('ingest')) {
      // Three conditions a round, rotated: none enabled; the 20 enabled, the last one matching (the
      // target); the 20 enabled and no message matching any (the triggers' and conditions' own cost).
      type Mode = 'none' | 'matching' | 'unmatched';
      const runs: Array<{
        round: number;
        mode: Mode;
        rps: number;
        errors: number;
        drainMs: number;
        cpuUs: number;
        pgUs: number;
        walBytes: number;
        rows: Record<string, number>;
      }> = [];
      const modes: Mode[] = ['none', 'matching', 'unmatched'];
      for (let round = 0; round < rounds; round++) {
        const order = modes.map((_, k) => modes[(k + round) % modes.length]!);
        for (const mode of order) {
          await setEnabled(mode !== 'none');
          await drained(db, keyA.workspaceId);
          if (vacuumFirst) await sql`vacuum analyze`.execute(db);
          await sleep(1_000);
          // The last round's runs profiled, one file a mode (bench/profile.ts reads them; compare two).
          const profiled = profile && round === rounds - 1 ? `${profile.replace(/\.cpuprofile$/, '')}-ingest-${mode}.cpuprofile` : undefined;
          const postgres = postgresPids();
          const written0 = await written(db, keyA.workspaceId);
          const [cpu0, pg0] = [groupCpuMs(servicePid), pidsCpuMs(postgres)];
          const load = () => fullSpeed(durationS, 50, () => webhook(mode === 'unmatched' ? 'Oi, qual o prazo de entrega?' : undefined));
          const run = profiled ? await profiledWindow(servicePid, profile!, profiled, load) : await load();
          const drainMs = await drained(db, keyA.workspaceId);
          const perWebhook = (ms: number) => (ms * 1000) / Math.max(1, run.done);
          const [cpuUs, pgUs] = [perWebhook(groupCpuMs(servicePid) - cpu0), perWebhook(pidsCpuMs(postgres) - pg0)];
          const written1 = await written(db, keyA.workspaceId);
          const rowsWritten = Object.fromEntries(WRITTEN.map((table) => [table, (written1.rows[table]! - written0.rows[table]!) / Math.max(1, run.done)]));
          const walBytes = (written1.walBytes - written0.walBytes) / Math.max(1, run.done);
          runs.push({ round, mode, rps: run.rps, errors: run.errors, drainMs, cpuUs, pgUs, walBytes, rows: rowsWritten });
          log(
            `ingest round ${round + 1}, ${mode}: ${run.rps.toFixed(0)}/s, ${run.errors} errors, ` +
              `automation jobs drained ${(drainMs / 1000).toFixed(1)} s after the window, CPU µs a webhook (runs included): service ${cpuUs.toFixed(0)}, PostgreSQL ${pgUs.toFixed(0)}`,
          );
        }
      }
      const none = runs.filter((r) => r.mode === 'none');
      const withAll = runs.filter((r) => r.mode === 'matching');
      const unmatched = runs.filter((r) => r.mode === 'unmatched');
      // The target counts each run until its automations' work is done: webhooks / (window + drain).
      const counted = (r: (typeof runs)[number]) => (r.rps * durationS) / (durationS + r.drainMs / 1000);
      const best = (list: typeof runs, rate: (r: (typeof runs)[number]) => number = counted) => Math.max(...list.map(rate));
      const ratio = best(withAll) / best(none);
      const perRound = (list: typeof runs, rate: (r: (typeof runs)[number]) => number = counted) =>
        list.map((w) => (rate(w) / rate(none.find((n) => n.round === w.round)!)).toFixed(2)).join(', ');
      const windowOnly = (r: (typeof runs)[number]) => r.rps;
      const errors = runs.reduce((sum, r) => sum + r.errors, 0);
      check(
        `(2) signed webhooks, closed loop 50 conn, ${durationS} s x ${rounds}${vacuumFirst ? ', VACUUM ANALYZE before each run' : ''}: with the 20 automations (1 matching every message: ${matchingActions === 'label' ? 'labels the thread' : 'moves the stage and labels the thread'}) vs none, each counted until its automation jobs drained: webhooks / (window + drain) (best of rounds)`,
        `${best(withAll).toFixed(0)}/s vs ${best(none).toFixed(0)}/s = **${ratio.toFixed(2)}x** (per round ${perRound(withAll)}), ${errors} errors`,
        '>= 0.8x',
        ratio >= 0.8 && errors === 0,
      );
      rows.push([
        '(2) the same, over the window alone (the drain left out; best of rounds)',
        `${best(withAll, windowOnly).toFixed(0)}/s vs ${best(none, windowOnly).toFixed(0)}/s = ${(best(withAll, windowOnly) / best(none, windowOnly)).toFixed(2)}x (per round ${perRound(withAll, windowOnly)})`,
        '',
        '',
      ]);
      rows.push([
        '(2) the same, the 20 enabled and no message matching any, counted until drained (best of rounds)',
        `${best(unmatched).toFixed(0)}/s = ${(best(unmatched) / best(none)).toFixed(2)}x (per round ${perRound(unmatched)})`,
        '',
        '',
      ]);
      const drainS = median(withAll.map((r) => r.drainMs)) / 1000;
      const sustained = median(withAll.map((r) => (r.rps * durationS) / (durationS + r.drainMs / 1000)));
      rows.push([
        '(2) with the 20: automation jobs left at the window end drained in (median); webhooks / (window + drain)',
        `${drainS.toFixed(1)} s; ${sustained.toFixed(0)}/s`,
        '',
        '',
      ]);
      const cpu = (list: typeof runs) => median(list.map((r) => r.cpuUs));
      rows.push([
        '(2) service CPU a webhook (its automation runs included), none / 20 with 1 matching / 20 none matching (median); none / 1 matching (the ratio a CPU-bound service reaches, steadier than rates on a shared machine)',
        `${cpu(none).toFixed(0)} / ${cpu(withAll).toFixed(0)} / ${cpu(unmatched).toFixed(0)} µs; **${(cpu(none) / cpu(withAll)).toFixed(2)}x**`,
        '',
        '',
      ]);
      const pgCpu = (list: typeof runs) => median(list.map((r) => r.pgUs));
      rows.push([
        "(2) PostgreSQL's CPU a webhook (all its processes), none / 20 with 1 matching / 20 none matching (median); none / 1 matching",
        `${pgCpu(none).toFixed(0)} / ${pgCpu(withAll).toFixed(0)} / ${pgCpu(unmatched).toFixed(0)} µs; ${(pgCpu(none) / pgCpu(withAll)).toFixed(2)}x`,
        '',
        '',
      ]);
      // Counts: what each message made PostgreSQL write, whatever else the machine was doing.
      const wal = (list: typeof runs) => median(list.map((r) => r.walBytes));
      const rowsOf = (list: typeof runs) =>
        WRITTEN.map((table) => `${table} ${median(list.map((r) => r.rows[table]!)).toFixed(2)}`)
          .filter((entry) => !entry.endsWith(' 0.00'))
          .join(', ');
      rows.push([
        '(2) WAL bytes a webhook (the window and its drain; full-page images included, so a checkpoint during a run adds to it), none / 20 with 1 matching / 20 none matching (median)',
        `${wal(none).toFixed(0)} / ${wal(withAll).toFixed(0)} / ${wal(unmatched).toFixed(0)} B; none / 1 matching ${(wal(none) / wal(withAll)).toFixed(2)}x`,
        '',
        '',
      ]);
      rows.push(['(2) rows inserted a webhook, none (median)', rowsOf(none), '', '']);
      rows.push(['(2) rows inserted a webhook, 20 with 1 matching (median)', rowsOf(withAll), '', '']);
    }

    // (1) Inbound -> the matching automation's change committed, at a fixed rate.
    if (only.has('latency')) {
      await setEnabled(true);
      await drained(db, keyA.workspaceId);
      if (vacuumFirst) {
        // What autovacuum would have done by now on a default server (this one may run with it off).
        await sql`vacuum analyze`.execute(db);
      }
      // An open event stream makes the service hold the workspace's lease, so its events NOTIFY at commit.
      stream = http.get(`${service.base}/v1/events/stream`, { agent: false, headers: a.auth }, (res) => res.resume());
      stream.on('error', () => {});
      for (let i = 0; ; i++) {
        const { rows: leased } = await sql<{ n: number }>`
          select count(*)::int as n from stream_listeners where workspace_id = ${keyA.workspaceId} and expires_at > now()`.execute(db);
        if (leased[0]!.n > 0) break;
        if (i > 100) throw new Error('the event stream took no lease');
        await sleep(100);
      }
      probe = await connectClient(scratch.url);
      const committedAt = new Map<string, number>();
      probe.on('notification', (n) => {
        if (n.channel === 'events_added' && n.payload) committedAt.set((BigInt(n.payload) & 0xffffffffn).toString(), Date.now());
      });
      await probe.query('listen events_added');

      const inlineBefore = await inlineRuns(service.base);
      const tag = `lat${stamp}`;
      const total = Math.round(rate * latencySeconds);
      const sentAt = new Map<number, number>();
      const answers: number[] = [];
      let errors = 0;
      let lateness = 0;
      const pending: Array<Promise<void>> = [];
      const paced = async () => {
        const start = performance.now() + 100;
        for (let i = 0; i < total; i++) {
          const due = start + (i * 1000) / rate;
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          lateness = Math.max(lateness, performance.now() - due);
          const r = webhook(`Oi, quero saber do meu pedido ${tag}-${i}`);
          const sent = Date.now();
          sentAt.set(i, sent);
          pending.push(
            post(r.url, r.body, r.headers).then((answer) => {
              if (answer.status >= 200 && answer.status < 300) answers.push(Date.now() - sent);
              else errors++;
            }),
          );
        }
        await Promise.all(pending);
        await drained(db, keyA.workspaceId);
      };
      if (profile) {
        await profiledWindow(servicePid, profile, profile, paced);
        note(`CPU profile of the service over run (1): ${profile} (npx tsx bench/profile.ts ${profile})`);
      } else await paced();
      await sleep(500);
      const inlineAfter = await inlineRuns(service.base);
      const ranBy = (outcome: string) => (inlineAfter.get(outcome) ?? 0) - (inlineBefore.get(outcome) ?? 0);
      // A run inline commits with its message (its rows' xmin is the savepoint's subtransaction, which
      // no NOTIFY names): its commit is the message's transaction's, counted so only when the service
      // says every run of the window was inline.
      const allInline = ranBy('behind') === 0 && ranBy('failed') === 0;
      const { rows: measured } = await sql<{
        content: string;
        received_at: Date;
        changed_at: Date | null;
        xid: string;
        message_xid: string;
        run_started: Date;
        run_ended: Date;
      }>`
        select m.content, m.created_at as received_at, h.created_at as changed_at, r.xmin::text as xid, m.xmin::text as message_xid,
               ar.created_at as run_started, r.created_at as run_ended
          from messages m
          join automation_runs ar on ar.workspace_id = m.workspace_id and ar.thread_id = m.thread_id and ar.automation_id = ${matching.id}
          join events r on r.workspace_id = m.workspace_id and r.type = 'automation.run' and (r.data->>'threadId')::uuid = m.thread_id
          left join thread_history h on h.workspace_id = m.workspace_id and h.thread_id = m.thread_id and h.field = ${matchingActions === 'label' ? 'labels' : 'stageId'} and h.actor_type = 'automation'
         where m.workspace_id = ${keyA.workspaceId} and m.direction = 'inbound' and m.content like ${`%${tag}-%`}`.execute(db);
      const toCommit: number[] = [];
      const dbTimes: number[] = [];
      const toStart: number[] = [];
      const runMs: number[] = [];
      let unmatched = 0;
      for (const row of measured) {
        const i = Number(row.content.slice(row.content.lastIndexOf('-') + 1));
        const commit = committedAt.get(row.xid) ?? (allInline ? committedAt.get(row.message_xid) : undefined);
        if (commit === undefined) unmatched++;
        else toCommit.push(commit - sentAt.get(i)!);
        if (row.changed_at) dbTimes.push(row.changed_at.getTime() - row.received_at.getTime());
        toStart.push(row.run_started.getTime() - row.received_at.getTime());
        runMs.push(row.run_ended.getTime() - row.run_started.getTime());
      }
      const p50 = pct(toCommit, 50);
      const p99 = pct(toCommit, 99);
      note(
        `(1) runs of the window by how they ran (the service's sf_automations_inline_total): inline ${ranBy('inline')}, behind an earlier run ${ranBy('behind')}, failed and queued ${ranBy('failed')}`,
      );
      log(
        `latency at ${rate}/s for ${latencySeconds} s: ${total} sent, ${errors} errors, ${measured.length} runs, ${unmatched} runs without a NOTIFY seen; ` +
          `POST -> commit p50 ${ms(p50)} p99 ${ms(p99)}; DB times p50 ${ms(pct(dbTimes, 50))} p99 ${ms(pct(dbTimes, 99))}`,
      );
      check(
        `(1) ${rate} inbound/s for ${latencySeconds} s (new contact each), 20 automations, 1 matching${vacuumFirst ? ', after VACUUM ANALYZE' : ', no VACUUM ANALYZE after the ingest rounds'}: webhook POST sent -> run's transaction committed (its NOTIFY received; a run inline commits with its message), p50 / p99`,
        `**${ms(p50)} / ${ms(p99)}** (max ${ms(Math.max(...toCommit))}; ${toCommit.length} of ${total} measured)`,
        'p50 <= 100 ms, p99 <= 500 ms',
        p50 <= 100 && p99 <= 500 && toCommit.length === total && errors === 0,
      );
      rows.push([
        `(1) the same, DB times: the ${matchingActions === 'label' ? 'label' : 'stage move'}'s thread_history.created_at - inbound message created_at, p50 / p99`,
        `${ms(pct(dbTimes, 50))} / ${ms(pct(dbTimes, 99))} (${dbTimes.length} moves)`,
        '',
        '',
      ]);
      rows.push([
        '(1) the same, where it goes (service clock): inbound created_at -> the matching run starts (job queued, claimed, thread locked, context read, 20 evaluated); run start -> its automation.run event (actions, run recorded), p50 / p99',
        `${ms(pct(toStart, 50))} / ${ms(pct(toStart, 99))}; ${ms(pct(runMs, 50))} / ${ms(pct(runMs, 99))}`,
        '',
        '',
      ]);
      rows.push([
        '(1) the same, webhook POST -> its 200 (the ingest alone), p50 / p99; the sender late by at most',
        `${ms(pct(answers, 50))} / ${ms(pct(answers, 99))}; ${ms(lateness)}`,
        '',
        '',
      ]);
      stream.destroy();
      stream = undefined;
      await probe.end();
      probe = undefined;
    }

    // (3) Idle timers: 100,000 pending, claim cost at a tenth and at all of it, then 1,000 falling due.
    if (only.has('timers')) {
      const idleC = await call<{ id: string }>(c, 'POST', '/automations', {
        name: 'Encerrar após 30 dias sem resposta',
        trigger: { event: 'thread.idle', minutes: 43_200, waitingOn: 'customer' },
        actions: [{ type: 'set_status', status: 'closed' }],
      });
      const insertPending = async (n: number) => {
        const started = performance.now();
        for (let done = 0; done < n; done += 50_000) {
          await sql`
            insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
            select ${keyC.workspaceId}::uuid, gen_random_uuid(), 'automation-idle', 'idle:' || t.thread_id::text,
                   jsonb_build_object('automationId', ${idleC.id}::uuid, 'threadId', t.thread_id, 'messageId', gen_random_uuid()), t.due, t.due
              from (select gen_random_uuid() as thread_id, now() + interval '1 day' + random() * interval '29 days' as due
                      from generate_series(1, ${Math.min(50_000, n - done)})) t`.execute(db);
        }
        return performance.now() - started;
      };
      const claimProbe = await connectClient(scratch.url);
      const claims: Array<{ pending: number; due: boolean; p50: number; p99: number; execMs: number; buffers: number; nodes: string }> = [];
      const claimSql = `select (c.job).id, c.left_behind, c.next_run_at
                          from claim_jobs($1::text, $2::text, $3::int, $4::int, $5::text, $6::jsonb, $7::int, $8::int) c`;
      // As an idle worker of automation-idle claims (concurrency 8, no groups).
      const claimArgs = ['automation-idle', `bench-probe:${process.pid}`, 8, 30_000, null, null, 8, 8];
      const measureClaims = async () => {
        const { rows: counted } = await sql<{ n: number }>`select count(*)::int as n from jobs where queue = 'automation-idle' and run_at > now()`.execute(db);
        const pendingNow = counted[0]!.n;
        for (const due of [false, true]) {
          // The probe's rolled-back due jobs leave dead index entries where a claim starts reading, as
          // fired timers do until autovacuum: vacuumed before each series (autovacuum may be off).
          await sql`vacuum jobs`.execute(db);
          const times: number[] = [];
          const explained: Array<{ exec: number; buffers: number; nodes: string }> = [];
          for (let i = 0; i < 60; i++) {
            await claimProbe.query('begin');
            try {
              if (due) {
                await claimProbe.query(
                  `insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
                   select $1::uuid, gen_random_uuid(), 'automation-idle', 'idle:' || t.id::text,
                          jsonb_build_object('automationId', $2::uuid, 'threadId', t.id, 'messageId', gen_random_uuid()), now() - interval '1 second', now() - interval '1 second'
                     from (select gen_random_uuid() as id from generate_series(1, 20)) t`,
                  [keyC.workspaceId, idleC.id],
                );
              }
              if (i % 10 === 9) {
                const { rows: plan } = await claimProbe.query(`explain (analyze, buffers, format json) ${claimSql}`, claimArgs);
                const top = (plan[0] as { 'QUERY PLAN': Array<{ Plan: Record<string, unknown>; 'Execution Time': number }> })['QUERY PLAN'][0]!;
                explained.push({
                  exec: top['Execution Time'],
                  buffers: Number(top.Plan['Shared Hit Blocks'] ?? 0) + Number(top.Plan['Shared Read Blocks'] ?? 0),
                  nodes: String(top.Plan['Node Type']),
                });
              } else {
                const t0 = performance.now();
                const { rows: got } = await claimProbe.query(claimSql, claimArgs);
                times.push(performance.now() - t0);
                const claimed = got.filter((row: { id: string | null }) => row.id !== null).length;
                if (claimed !== (due ? 8 : 0)) throw new Error(`a claim with ${due ? 'some' : 'nothing'} due took ${claimed} jobs`);
              }
            } finally {
              await claimProbe.query('rollback');
            }
          }
          claims.push({
            pending: pendingNow,
            due,
            p50: pct(times, 50),
            p99: pct(times, 99),
            execMs: median(explained.map((e) => e.exec)),
            buffers: median(explained.map((e) => e.buffers)),
            nodes: explained[0]!.nodes,
          });
        }
      };
      const first = Math.round(pendingTimers / 10);
      const insertMs1 = await insertPending(first);
      await measureClaims();
      const insertMs2 = await insertPending(pendingTimers - first);
      await measureClaims();
      note(
        `pending timers: ${first.toLocaleString('en-US')} inserted in ${(insertMs1 / 1000).toFixed(1)} s, then ${(pendingTimers - first).toLocaleString('en-US')} more in ${(insertMs2 / 1000).toFixed(1)} s (bulk SQL, no ANALYZE; jobs vacuumed before each claim series)`,
      );
      for (const claim of claims) {
        rows.push([
          `(3) claim_jobs('automation-idle', limit 8), ${claim.pending.toLocaleString('en-US')} pending, ${claim.due ? '20 due (8 claimed)' : 'nothing due'}: round trip p50 / p99; EXPLAIN ANALYZE execution, shared buffers`,
          `${claim.p50.toFixed(2)} / ${claim.p99.toFixed(2)} ms; ${claim.execMs.toFixed(3)} ms, ${claim.buffers} buffers`,
          '',
          '',
        ]);
      }
      const flat = [false, true].every((due) => {
        const [small, large] = claims.filter((cl) => cl.due === due);
        return large!.buffers <= small!.buffers * 1.5 + 10 && large!.execMs <= small!.execMs * 2 + 1;
      });
      const cost = (due: boolean) =>
        claims
          .filter((cl) => cl.due === due)
          .map((cl) => `${cl.buffers} buffers / ${cl.execMs.toFixed(2)} ms`)
          .join(' -> ');
      check(
        `(3) timer check cost, ${first.toLocaleString('en-US')} -> ${pendingTimers.toLocaleString('en-US')} pending`,
        `nothing due: ${cost(false)}; 20 due: ${cost(true)}`,
        'does not grow (buffers <= 1.5x + 10, time <= 2x + 1 ms)',
        flat,
      );
      await claimProbe.end();

      // The threads whose silence falls due: a customer's message each, then our answer, spread out.
      const idleB = await call<{ id: string }>(b, 'POST', '/automations', {
        name: 'Encerrar sem resposta',
        trigger: { event: 'thread.idle', minutes: 1, waitingOn: 'customer' },
        actions: [{ type: 'set_status', status: 'closed' }],
      });
      const sandboxB = keyB.channels.find((ch) => ch.type === 'whatsapp')!.id;
      const contacts: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          while (next < dueTimers) {
            const n = next++;
            const m = await call<{ contactId: string }>(b, 'POST', `/channels/${sandboxB}/sandbox/inbound`, {
              from: `+55219${String(n).padStart(8, '0')}`,
              content: 'Oi, tudo bem?',
            });
            contacts.push(m.contactId);
          }
        }),
      );
      const answersStarted = performance.now();
      const sends: Array<Promise<unknown>> = [];
      for (let i = 0; i < contacts.length; i++) {
        const wait = answersStarted + (i * spreadS * 1000) / contacts.length - performance.now();
        if (wait > 0) await sleep(wait);
        sends.push(call(b, 'POST', '/messages', { contactId: contacts[i], channelId: sandboxB, content: 'Podemos ajudar em algo mais?' }));
      }
      await Promise.all(sends);
      const scheduled = await jobsLeft(db, keyB.workspaceId, 'automation-idle');
      const { rows: pendingRows } = await sql<{ n: number }>`select count(*)::int as n from jobs where queue = 'automation-idle'`.execute(db);
      note(
        `${contacts.length} answers sent over ${((performance.now() - answersStarted) / 1000).toFixed(1)} s: ${scheduled} timers scheduled by the service, ${pendingRows[0]!.n.toLocaleString('en-US')} automation-idle jobs in the queue`,
      );
      const deadline = Date.now() + (spreadS + 60 + 60) * 1000;
      let fired = 0;
      for (;;) {
        const { rows: r } = await sql<{ n: number }>`
          select count(*)::int as n from automation_runs where workspace_id = ${keyB.workspaceId} and automation_id = ${idleB.id}`.execute(db);
        fired = r[0]!.n;
        if (fired >= contacts.length || Date.now() > deadline) break;
        await sleep(500);
      }
      const { rows: late } = await sql<{ late_ms: number; status: string }>`
        select extract(epoch from r.created_at - (m.created_at + interval '1 minute')) * 1000 as late_ms, r.status
          from automation_runs r
          join messages m on m.workspace_id = r.workspace_id and m.id = substring(r.trigger_key from 6)::uuid
         where r.workspace_id = ${keyB.workspaceId} and r.automation_id = ${idleB.id}`.execute(db);
      const { rows: closed } = await sql<{ n: number }>`
        select count(*)::int as n from threads where workspace_id = ${keyB.workspaceId} and status = 'closed'`.execute(db);
      const lateness = late.map((r) => Number(r.late_ms));
      const succeeded = late.filter((r) => r.status === 'succeeded').length;
      check(
        `(3) ${contacts.length} thread.idle timers due over ${spreadS} s among ${pendingRows[0]!.n.toLocaleString('en-US')} pending: run created_at - due, p50 / p99 / max`,
        `${ms(pct(lateness, 50))} / **${ms(pct(lateness, 99))}** / ${ms(Math.max(...lateness))}; ${fired} fired (${succeeded} succeeded), ${closed[0]!.n} threads closed`,
        'p99 <= 5 s, every one fired',
        pct(lateness, 99) <= 5_000 && fired === contacts.length && succeeded === contacts.length,
      );
    }

    const warnings = service
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50'));
    if (warnings.length > 0) note(`service warnings (last ${Math.min(10, warnings.length)} of ${warnings.length}):\n${warnings.slice(-10).join('\n')}`);
    await stopProcess(service.child);
  } finally {
    stream?.destroy();
    await probe?.end().catch(() => {});
    await graph.close();
    await stopAll();
    await db.destroy();
    await scratch.drop();
    agent.destroy();
  }
  const machine1 = machineCpuMs();
  const busyShare = (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total);
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const settings =
    `BENCH_DURATION_S=${durationS}, BENCH_AUTOMATIONS_ROUNDS=${rounds}, BENCH_AUTOMATIONS_RATE=${rate}, BENCH_AUTOMATIONS_SECONDS=${latencySeconds}, ` +
    `BENCH_AUTOMATIONS_PENDING=${pendingTimers}, BENCH_AUTOMATIONS_DUE=${dueTimers}, BENCH_AUTOMATIONS_SPREAD_S=${spreadS}; ` +
    `${os.cpus().length} cores, load average ${load0.toFixed(1)} at the start, ${loadAverage().toFixed(1)} at the end (machine ${(busyShare * 100).toFixed(0)} % busy over the bench), Node ${process.version}`;
  log(settings);
  writeReport('automations', `# Automations bench ${stamp}\n\n${settings}\n\n${table}\n\n${notes.join('\n\n')}\n`);
  if (missed) process.exitCode = 1;
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:automations failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
