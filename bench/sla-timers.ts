// npm run bench:sla-timers: how late sla.breached is recorded when 100,000 threads run clocks under
// a policy. Seeds (in SQL, on a throw-away database) 100,000 open threads, each with a running
// first-response clock and its timer on the job queue (queue.ts's enqueueEachQuery); DUE of them fall
// due over the next SPREAD seconds, the rest in a month. Then runs one instance's SLA timer worker
// (concurrency as AUTOMATION_CONCURRENCY's default) and reports, for the breaches recorded, how long
// after its due time each event was recorded (p50, p95, max). The first falls due LEAD seconds
// (default 120) after seeding starts: seeding must end before it.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createWorkspace } from '../src/db/workspaces.js';
import { createJobListener } from '../src/jobs/listen.js';
import { enqueueEachQuery } from '../src/jobs/queue.js';
import { startWorker } from '../src/jobs/worker.js';
import { createLogger } from '../src/logger.js';
import { DEFAULT_STAGES } from '../src/provisioning.js';
import { slaTimerHandler } from '../src/sla/timers.js';

const THREADS = Number(process.env.THREADS || 100_000);
const DUE = Number(process.env.DUE || 2_000);
const SPREAD_S = Number(process.env.SPREAD || 20);
const adminUrl = process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
const logger = createLogger('silent');
const config = loadConfig({ NODE_ENV: 'production', DATABASE_URL: adminUrl });

const name = `sf_bench_slat_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`create database ${name}`);
const url = new URL(adminUrl);
url.pathname = `/${name}`;
const db = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://', poolSize: 10 });
try {
  await migrateToLatest(db);
  const { workspaceId, channels } = await createWorkspace(db, 'bench', DEFAULT_STAGES);
  const stage = await db.selectFrom('stages').select('id').where('workspace_id', '=', workspaceId).orderBy('position').executeTakeFirstOrThrow();
  const policyId = randomUUID();
  await sql`insert into sla_policies (workspace_id, id, name, position, targets, created_at, updated_at)
            values (${workspaceId}, ${policyId}, 'bench', 1, '{"firstResponseMinutes": 15}', now(), now())`.execute(db);
  await sql`insert into contacts (workspace_id, id, name, created_at, updated_at)
            select ${workspaceId}::uuid, gen_random_uuid(), 'Contato ' || n, now(), now() from generate_series(1, ${THREADS}) n`.execute(db);
  const start = Date.now() + Number(process.env.LEAD || 120) * 1000;
  await sql`insert into threads (workspace_id, id, contact_id, channel_id, stage_id, stage_entered_at, status, created_at, updated_at, sla)
            select workspace_id, gen_random_uuid(), id, ${channels[0]!.id}::uuid, ${stage.id}::uuid, now(), 'open', now(), now(),
                   jsonb_build_object('policyId', ${policyId}::text, 'firstResponseDueAt', null, 'nextResponseDueAt', null,
                                      'resolutionDueAt', null, 'status', 'active', 'breached', '[]'::jsonb)
              from contacts where workspace_id = ${workspaceId}`.execute(db);
  await sql`insert into sla_clocks (workspace_id, thread_id, metric, started_at, policy_id, due_at)
            select workspace_id, id, 'firstResponse', now(), ${policyId}::uuid,
                   case when n <= ${DUE} then ${new Date(start).toISOString()}::timestamptz + (n * ${(SPREAD_S * 1000) / DUE}) * interval '1 millisecond'
                        else now() + interval '30 days' end
              from (select workspace_id, id, row_number() over () as n from threads where workspace_id = ${workspaceId}) t`.execute(db);
  await sql`with timers as (
              select c.thread_id::text as thread_id, c.due_at, gen_random_uuid() as job_id
                from sla_clocks c where c.workspace_id = ${workspaceId}
            ), added as (
              ${enqueueEachQuery('sla-timer', {
                workspaceId,
                from: sql`timers t`,
                id: sql`t.job_id`,
                orderingKey: sql`'sla:' || t.thread_id`,
                payload: { threadId: sql`t.thread_id` },
                runAt: sql`t.due_at`,
                createdAt: sql`t.due_at`,
              })}
            ) select count(*) from added`.execute(db);
  await sql`analyze`.execute(db);
  console.log(JSON.stringify({ threads: THREADS, due: DUE, spreadSeconds: SPREAD_S, seededSecondsBeforeFirstDue: Math.round((start - Date.now()) / 1000) }));
  const listener = createJobListener({ db, databaseUrl: url.toString(), logger });
  const worker = startWorker(slaTimerHandler({ db, logger, retryBaseMs: 100 }), {
    db,
    logger,
    listener,
    concurrency: config.automationConcurrency,
    leaseMs: config.jobLeaseMs,
    pollMs: config.jobPollMs,
  });
  const deadline = start + SPREAD_S * 1000 + 60_000;
  for (;;) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from events where workspace_id = ${workspaceId} and type = 'sla.breached'`.execute(db);
    if (rows[0]!.n >= DUE || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await worker.stop(AbortSignal.timeout(5_000));
  await listener.close();
  const { rows } = await sql<{ late_ms: number }>`
    select extract(epoch from (e.created_at - c.due_at)) * 1000 as late_ms
      from events e join sla_clocks c on c.workspace_id = e.workspace_id and c.thread_id = (e.data->>'id')::uuid and c.metric = 'firstResponse'
     where e.workspace_id = ${workspaceId} and e.type = 'sla.breached' order by 1`.execute(db);
  const late = rows.map((r) => Number(r.late_ms));
  const at = (q: number) => Math.round(late[Math.min(late.length - 1, Math.floor(q * late.length))] ?? NaN);
  console.log(JSON.stringify({ breaches: late.length, expected: DUE, lateP50Ms: at(0.5), lateP95Ms: at(0.95), lateMaxMs: Math.round(late.at(-1) ?? NaN) }));
} finally {
  await db.destroy();
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
