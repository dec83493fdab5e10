// npx tsx bench/automation-statements.ts [matching|unmatched|none|idle]: the statements (and round
// trips, through a counting TCP proxy) of one sandbox inbound and of the automation run it causes,
// one message at a time, after 5 to warm up, against an in-process server with its workers on a
// database of its own (DATABASE_URL's server). `matching`: 20 message.received automations, the
// last matching (move_stage + add_labels, as bench:automations); `unmatched`: none of them matches;
// `none`: no automation; `idle`: 10 silences and a 1-minute thread.idle rule that closes them (the
// statements a timer's run takes). Prints the averages and the last run's statements. Unlike a
// rate, the count does not depend on what else the machine is doing.
// BENCH_EXACT=1: no workers; each inbound's queued automation-event jobs are claimed and run by the
// bench itself, one at a time, so that the turns counted are the request's and the runs' alone
// (with workers, their claims for other queues, woken by the same commit, land in either window).
// Also the WAL an inbound writes, its run's included (bytes, from the WAL's insert position), and
// the last one's records by table (by relation and kind with BENCH_WAL_RECORDS=1) when pg_waldump
// and the server's WAL files are readable here (bench/lib/wal.ts). BENCH_AUTOMATIONS_MATCHING=label:
// the matching automation only labels the thread (as bench:automations' option).
import pg from 'pg';
import { runEventAutomations } from '../src/automations/engine.js';
import { claimJobs, type Job } from '../src/jobs/queue.js';
import { createWorkspace, request } from '../test/helpers/api.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';
import { startCountingProxy } from './lib/pg-proxy.js';
import { indexTables, walByRelation, walByTable, walBytes, walPosition, type WalRecords } from './lib/wal.js';

const proxy = await startCountingProxy();
let log: string[] | undefined;
// Every query pg sends, logged while `log` is set (pg's own method, called with its client).
const orig = Reflect.get(pg.Client.prototype, 'query') as (this: unknown, ...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: unknown, ...args: unknown[]) {
  const a = args[0] as string | { text: string };
  const text = typeof a === 'string' ? a : a?.text;
  if (log && text) log.push(text.replace(/\s+/g, ' ').slice(0, 140));
  return orig.apply(this, args);
};
const own = await ownDatabase();
const exact = process.env.BENCH_EXACT === '1';
const server = await startServer({ databaseUrl: proxy.via(own.url), redisUrl: false, jobs: !exact });
const db = server.db;
// The bench's own polls of the queue go around the proxy: the turns counted are the service's alone.
const direct = new pg.Client({ connectionString: own.url });
await direct.connect();
const mode = process.argv[2] ?? 'matching';
try {
  const ws = await createWorkspace(server);
  if (mode === 'idle') {
    await idle(ws);
    process.exit(0);
  }
  const k = { apiKey: ws.apiKey };
  const stages = (await request(server, 'GET', '/v1/stages', k)).body as { data: Array<{ id: string; name: string }> };
  const stage = stages.data.find((s) => s.name === 'Em atendimento')!.id;
  const n = mode === 'none' ? 0 : 20;
  for (let i = 1; i < n; i++)
    await request(server, 'POST', '/v1/automations', {
      ...k,
      body: {
        name: `n${i}`,
        trigger: { event: 'message.received' },
        conditions: { any: [{ field: 'message.content', operator: 'contains', value: `zzz${i}` }] },
        actions: [{ type: 'add_labels', target: 'thread', labels: [`n${i}`] }],
      },
    });
  if (n)
    await request(server, 'POST', '/v1/automations', {
      ...k,
      body: {
        name: 'm',
        trigger: { event: 'message.received' },
        conditions: { any: [{ field: 'message.content', operator: 'contains', value: 'pedido' }] },
        actions: [
          ...(process.env.BENCH_AUTOMATIONS_MATCHING === 'label' ? [] : [{ type: 'move_stage', stageId: stage }]),
          { type: 'add_labels', target: 'thread', labels: ['pedido'] },
        ],
      },
    });
  const channels = (await request(server, 'GET', '/v1/channels', k)).body as { data: Array<{ id: string; type: string }> };
  const ch = channels.data.find((c) => c.type === 'whatsapp')!.id;
  const left = async () => Number((await direct.query<{ n: number }>(`select count(*)::int as n from jobs where queue like 'automation%'`)).rows[0]!.n);
  const send = async (i: number) => {
    const res = await request(server, 'POST', `/v1/channels/${ch}/sandbox/inbound`, {
      ...k,
      body: { from: `+5511987${String(i).padStart(6, '0')}`, content: mode === 'unmatched' ? 'oi' : 'meu pedido' },
    });
    if (res.status >= 300) throw new Error(String(res.status));
  };
  /** The queued automation-event jobs claimed and run one by one, as a worker would (BENCH_EXACT). */
  const runQueued = async () => {
    for (;;) {
      const { jobs } = await claimJobs(db, { queue: 'automation-event', workerId: 'bench', limit: 1, leaseMs: 60_000 });
      if (jobs.length === 0) return;
      await runEventAutomations(db, jobs[0] as Job<'automation-event'>);
    }
  };
  for (let i = 0; i < 5; i++) {
    await send(i);
    if (exact) await runQueued();
    while ((await left()) > 0) await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 1500));
  const N = 20;
  let reqTurns = 0,
    runTurns = 0,
    reqStmts = 0,
    runStmts = 0;
  let sample: string[] = [];
  let wal = 0;
  let lastWal: WalRecords[] | undefined;
  for (let i = 0; i < N; i++) {
    const walFrom = await walPosition(direct);
    log = [];
    const t0 = proxy.turns();
    await send(100 + i);
    reqTurns += proxy.turns() - t0;
    reqStmts += log.filter((s) => !s.includes('from jobs where queue like')).length;
    const reqLog = log;
    log = [];
    const t1 = proxy.turns();
    if (exact) await runQueued();
    while ((await left()) > 0) await new Promise((r) => setTimeout(r, 20));
    if (!exact) await new Promise((r) => setTimeout(r, 300));
    const runLog = log.filter((s) => (!s.includes('from jobs where queue like') && !s.includes('claim_jobs')) || s.includes('claim_jobs'));
    runStmts += runLog.filter((s) => !s.includes('from jobs where queue like')).length;
    runTurns += proxy.turns() - t1;
    if (i === N - 1) sample = [...reqLog.map((s) => 'REQ ' + s), ...runLog.map((s) => 'RUN ' + s)];
    log = undefined;
    const walTo = await walPosition(direct);
    wal += await walBytes(direct, walFrom, walTo);
    if (i === N - 1) lastWal = await walByRelation(direct, walFrom, walTo);
  }
  console.log(
    `${mode}: request ${(reqStmts / N).toFixed(1)} statements, ${(reqTurns / N).toFixed(1)} turns; after (run + workers) ${(runStmts / N).toFixed(1)} statements, ${(runTurns / N).toFixed(1)} turns; ${((reqTurns + runTurns) / N).toFixed(1)} turns an inbound in all`,
  );
  console.log(sample.join('\n'));
  console.log(`WAL an inbound (its run included): ${(wal / N).toFixed(0)} B (mean of ${N})`);
  if (lastWal) {
    const byTable = walByTable(lastWal, await indexTables(direct));
    console.log(`the last inbound's WAL by table (its indexes included), ${lastWal.reduce((sum, r) => sum + r.records, 0)} records:`);
    for (const t of byTable) console.log(`  ${t.table}: ${t.bytes} B, ${t.records} records`);
    if (process.env.BENCH_WAL_RECORDS === '1') for (const r of lastWal) console.log(`  ${r.relation} ${r.kind}: ${r.bytes} B, ${r.records}`);
  } else console.log('(pg_waldump or the WAL files are not readable here: no records by table)');
} finally {
  await direct.end();
  await server.close();
  await own.drop();
  proxy.close();
}

async function idle(ws: { apiKey: string; workspaceId: string }) {
  const { sql } = await import('kysely');
  const k = { apiKey: ws.apiKey };
  const channels = (await request(server, 'GET', '/v1/channels', k)).body as { data: Array<{ id: string; type: string }> };
  const ch = channels.data.find((c) => c.type === 'whatsapp')!.id;
  const N = 10;
  await sql`with c as (insert into contacts (workspace_id, id, name, created_at, updated_at) select ${ws.workspaceId}::uuid, gen_random_uuid(), 'c'||g, now(), now() from generate_series(1, ${N}) g returning id),
    t as (insert into threads (workspace_id, id, contact_id, channel_id, stage_id, stage_entered_at, status, last_message_at, created_at, updated_at)
      select ${ws.workspaceId}::uuid, gen_random_uuid(), c.id, ${ch}::uuid, (select id from stages where workspace_id = ${ws.workspaceId} order by position limit 1), now(), 'open', now() - interval '10 minutes', now(), now() from c returning id, contact_id)
    insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, created_at)
    select ${ws.workspaceId}::uuid, gen_random_uuid(), t.id, t.contact_id, ${ch}::uuid, 'outbound', 'x', 'delivered', now() - interval '10 minutes' from t`.execute(
    db,
  );
  log = [];
  await request(server, 'POST', '/v1/automations', {
    ...k,
    body: { name: 'idle', trigger: { event: 'thread.idle', minutes: 1, waitingOn: 'customer' }, actions: [{ type: 'set_status', status: 'closed' }] },
  });
  const created = log.length;
  const t0 = proxy.turns();
  for (let i = 0; i < 100; i++) {
    const n = Number((await sql<{ n: number }>`select count(*)::int as n from automation_runs`.execute(db)).rows[0]!.n);
    if (n >= N) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 500));
  const runLog = log.slice(created).filter((s) => !s.includes('from automation_runs'));
  const turns = proxy.turns() - t0;
  console.log(
    `idle: ${(runLog.filter((s) => !s.includes('claim_jobs')).length / N).toFixed(1)} statements a timer (claims aside), ${runLog.filter((s) => s.includes('claim_jobs')).length} claims for ${N}; ${(turns / N).toFixed(1)} round trips a timer (claims and the bench's polls included)`,
  );
  const seen = new Set<string>();
  console.log(
    runLog
      .filter((s) => {
        const k = s.slice(0, 60);
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
      })
      .join('\n'),
  );
  await server.close();
  await own.drop();
  proxy.close();
}
