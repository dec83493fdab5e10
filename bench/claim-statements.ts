// npx tsx bench/claim-statements.ts: what PostgreSQL spends on the queue's claim (claimJobs and its
// claim_jobs function), counted by pg_stat_statements (loaded on DATABASE_URL's server, with
// track = all and track_planning = on) in a database of its own: per call, the planning and the
// total time of the claim's statement and of the function's inner statement, how many times each was
// planned, and its buffer hits. One session (a pool of one) enqueues BENCH_JOBS jobs (2,000; a
// tenth with an ordering key, payloads over 8 groups), ANALYZEs jobs, then claims them 10 at a time
// and finishes them, alternating plain and grouped claims (an allowance per group, as the webhook
// and media workers claim), then makes BENCH_IDLE claims (500) of the empty queue, as an idle worker
// does, each counted on its own. BENCH_MIGRATE_TO (a migration's name) migrates only that far, to measure an earlier
// claim_jobs in the same sitting. Counts and plan time, not rates: the machine is shared.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { createDatabase } from '../src/db/database.js';
import { migrations } from '../src/db/migrate.js';
import { claimJobs, enqueueJob, finishJobs } from '../src/jobs/queue.js';
import { createScratchDatabase } from '../scripts/lib/real-server.js';

const serverUrl = process.env.DATABASE_URL;
if (!serverUrl) throw new Error('bench/claim-statements.ts needs DATABASE_URL');
const jobCount = Number(process.env.BENCH_JOBS || 2_000);
const idleClaims = Number(process.env.BENCH_IDLE || 500);
const target = process.env.BENCH_MIGRATE_TO || Object.keys(migrations).at(-1)!;
const queue = 'bench-claim';

/** Prints the claim's statements as pg_stat_statements counted them since the last call, and starts counting again. */
async function report(title: string): Promise<void> {
  const { rows } = await sql<{ query: string; calls: string; plans: string; plan_us: number; total_us: number; hits: number }>`
    select query, calls, plans, total_plan_time * 1000 / calls as plan_us,
           (total_plan_time + total_exec_time) * 1000 / calls as total_us, shared_blks_hit::float8 / calls as hits
      from pg_stat_statements
     where dbid = (select oid from pg_database where datname = current_database())
       and (query like '%claim_jobs%' or query like '%with candidates as materialized%')
       and query not like '%pg_stat_statements%'
     order by total_exec_time desc`.execute(db);
  console.log(`\n== ${title}\ncalls | plans | planning µs/call | total µs/call | buffer hits/call | statement`);
  for (const row of rows) {
    const text = row.query.replace(/\s+/g, ' ').trim().slice(0, 70);
    console.log(`${row.calls} | ${row.plans} | ${row.plan_us.toFixed(0)} | ${row.total_us.toFixed(0)} | ${row.hits.toFixed(1)} | ${text}`);
  }
  await sql`select pg_stat_statements_reset()`.execute(db);
}

const scratch = await createScratchDatabase(serverUrl, 'sf_claim');
const db = createDatabase({ databaseUrl: scratch.url, pgliteDir: 'memory://', poolSize: 1 });
try {
  const migrated = await new Migrator({ db, provider: { getMigrations: () => Promise.resolve(migrations) } }).migrateTo(target);
  if (migrated.error) throw new Error(`migrating to ${target} failed`, { cause: migrated.error });
  await sql`create extension if not exists pg_stat_statements`.execute(db);
  const workspaceId = randomUUID();
  await sql`insert into workspaces (id, name) values (${workspaceId}, 'bench')`.execute(db);
  for (let i = 0; i < jobCount; i++) {
    const orderingKey = i % 10 === 0 ? `k${i % 50}` : undefined;
    await enqueueJob(db, { workspaceId, queue, orderingKey, payload: { group: `g${i % 8}`, i } });
  }
  await sql`analyze jobs`.execute(db);

  const groups = { field: 'group', allowance: { g0: 1, g1: 0, g2: 3 }, otherwise: 4 };
  let claims = 0;
  let claimed = 0;
  await sql`select pg_stat_statements_reset()`.execute(db);
  for (;;) {
    const claim = await claimJobs(db, { queue, workerId: 'bench', limit: 10, leaseMs: 60_000, groups: claims % 2 === 1 ? groups : undefined });
    claims++;
    claimed += claim.jobs.length;
    if (claim.jobs.length === 0 && !claim.leftBehind) break;
    await finishJobs(db, claim.jobs);
  }
  await report(`${claims} claims took ${claimed} of ${jobCount} jobs (migrated to ${target})`);
  for (let i = 0; i < idleClaims; i++) await claimJobs(db, { queue, workerId: 'bench', limit: 10, leaseMs: 60_000 });
  await report(`${idleClaims} claims of the empty queue`);
} finally {
  await db.destroy();
  await scratch.drop();
}
