// npx tsx bench/pg-cost.ts: what one POST /v1/contacts costs the service's process and PostgreSQL,
// with and without an Idempotency-Key, measured per request instead of as a rate (a rate moves with
// whatever else the machine runs; CPU time per request much less). The app runs in process on a
// database of its own (DATABASE_URL's server); `BENCH_REQUESTS` (2000) requests of each kind at
// `BENCH_CONCURRENCY` (16), alternating, over `BENCH_ROUNDS` (3) rounds after a warm-up. For the
// PostgreSQL backends serving the app it reads, from /proc, their CPU time (schedstat, ns) and their
// voluntary context switches (each one a wake-up: a backend sleeps whenever it waits for its
// client's next message). BENCH_MODE=db runs the request's transaction alone, straight on the
// database (what the driver costs, without HTTP).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';
import { buildContact, createWorkspace, request } from '../test/helpers/api.js';
import { transact } from '../src/db/database.js';
import { apiKeyActor } from '../src/actor.js';
import { lockAndFindResult, storeResult } from '../src/db/idempotency.js';
import { createContact } from '../src/services/contacts.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';

const total = Number(process.env.BENCH_REQUESTS || 2000);
const concurrency = Number(process.env.BENCH_CONCURRENCY || 16);
const rounds = Number(process.env.BENCH_ROUNDS || 3);
/** http: the whole request through the app; db: the request's transaction alone, straight on the database. */
const mode = process.env.BENCH_MODE || 'http';

interface Counters {
  cpuNs: number;
  wakeups: number;
}

function backendCounters(pids: number[]): Counters {
  const sum: Counters = { cpuNs: 0, wakeups: 0 };
  for (const pid of pids) {
    try {
      sum.cpuNs += Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
      sum.wakeups += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    } catch {
      // a backend that ended
    }
  }
  return sum;
}

const own = await ownDatabase();
const server = await startServer({ databaseUrl: own.url, redisUrl: false });
const admin = new pg.Client({ connectionString: own.url });
await admin.connect();
const dbName = new URL(own.url).pathname.slice(1);
try {
  const ws = await createWorkspace(server);
  const post = async (keyed: boolean) => {
    if (mode === 'db') {
      const scope = { workspaceId: ws.workspaceId, apiKeyId: ws.keyId, key: randomUUID() };
      await transact(server.db, async (trx) => {
        const lookup = keyed ? await lockAndFindResult(trx, scope, { withNext: true }) : undefined;
        const inserted = await createContact(trx, ws.workspaceId, buildContact(), apiKeyActor(ws.keyId));
        if (lookup && (await lookup.answer()).locked)
          await storeResult(trx, scope, {
            method: 'POST',
            path: '/v1/contacts',
            bodySha256: 'x'.repeat(64),
            status: 201,
            response: JSON.stringify(inserted),
            responseSealed: false,
          });
      });
      return;
    }
    const res = await request(server, 'POST', '/v1/contacts', {
      apiKey: ws.apiKey,
      body: buildContact(),
      headers: keyed ? { 'idempotency-key': randomUUID() } : { 'x-bench-nonce': randomUUID() },
    });
    if (res.status !== 201) throw new Error(`POST /v1/contacts answered ${res.status}`);
  };
  const run = async (keyed: boolean, n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) await post(keyed);
      }),
    );
  };
  await run(true, 300);
  await run(false, 300);
  const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
  const pids = rows.map((row) => row.pid);
  const results: Record<string, string[]> = { keyed: [], keyless: [] };
  for (let round = 0; round < rounds; round++) {
    for (const keyed of round % 2 === 0 ? [true, false] : [false, true]) {
      const b0 = backendCounters(pids);
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      await run(keyed, total);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      const c1 = process.cpuUsage(c0);
      const b1 = backendCounters(pids);
      results[keyed ? 'keyed' : 'keyless']!.push(
        `CPU µs a request: this process ${((c1.user + c1.system) / total).toFixed(0)} (the load's own included), PostgreSQL ${((b1.cpuNs - b0.cpuNs) / 1000 / total).toFixed(0)}; ` +
          `PostgreSQL wake-ups ${((b1.wakeups - b0.wakeups) / total).toFixed(2)}; ${((total / ms) * 1000).toFixed(0)} req/s`,
      );
    }
  }
  for (const [kind, lines] of Object.entries(results)) for (const line of lines) process.stdout.write(`${kind.padEnd(8)} ${line}\n`);
} finally {
  await admin.end();
  await server.close();
  await own.drop();
}
