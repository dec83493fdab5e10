// npm run bench:queue: the job queue of src/jobs on its own, for the comparison with pg-boss and
// graphile-worker in BENCHMARKS.md: N jobs enqueued one by one (each its own transaction, keys over
// 100 contacts), then drained by one worker (concurrency 32, a no-op job), and the latency of one
// job added to an idle worker. On PostgreSQL (a throw-away database) and on PGlite.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createJobListener } from '../src/jobs/listen.js';
import { enqueueJob } from '../src/jobs/queue.js';
import { startWorker } from '../src/jobs/worker.js';
import { createLogger } from '../src/logger.js';

const N = Number(process.env.N || 2000);
const adminUrl = process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
const logger = createLogger('silent');

async function measure(on: string, db: Db, databaseUrl: string | undefined): Promise<void> {
  await migrateToLatest(db);
  const workspaceId = randomUUID();
  await sql`insert into workspaces (id, name) values (${workspaceId}, 'bench')`.execute(db);
  let t = Date.now();
  for (let i = 0; i < N; i++) {
    await db.transaction().execute((trx) => enqueueJob(trx, { workspaceId, queue: 'bench', orderingKey: `k${i % 100}`, payload: { i } }));
  }
  const enqueueMs = Date.now() - t;
  let done = 0;
  let onDone: () => void = () => {};
  const ranAt: number[] = [];
  const listener = createJobListener({ db, databaseUrl, logger });
  t = Date.now();
  const worker = startWorker(
    {
      queue: 'bench',
      maxAttempts: 1,
      retryBaseMs: 1,
      run() {
        ranAt.push(Date.now());
        if (++done >= N) onDone();
        return Promise.resolve({ kind: 'done' });
      },
      async giveUp() {},
    },
    { db, logger, listener, concurrency: 32, leaseMs: 60_000, pollMs: 1_000 },
  );
  await new Promise<void>((resolve) => (done >= N ? resolve() : (onDone = resolve)));
  const drainMs = Date.now() - t;
  const latencies: number[] = [];
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = ranAt.length;
    const added = Date.now();
    await db.transaction().execute((trx) => enqueueJob(trx, { workspaceId, queue: 'bench', payload: { i } }));
    while (ranAt.length === before) await new Promise((resolve) => setTimeout(resolve, 1));
    latencies.push(ranAt.at(-1)! - added);
  }
  latencies.sort((a, b) => a - b);
  await worker.stop(AbortSignal.timeout(2_000));
  await listener.close();
  console.log(
    JSON.stringify({
      queue: 'src/jobs',
      on,
      jobs: N,
      enqueuePerSec: Math.round(N / (enqueueMs / 1000)),
      drainPerSec: Math.round(N / (drainMs / 1000)),
      idleLatencyMsP50: latencies[10],
    }),
  );
}

const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
const name = `sf_bench_queue_${Date.now()}`;
await admin.query(`create database ${name}`);
try {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const onPg = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://', poolSize: 10 });
  await measure('postgresql', onPg, url.toString());
  await onPg.destroy();
} finally {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
const onPglite = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
await measure('pglite', onPglite, undefined);
await onPglite.destroy();
