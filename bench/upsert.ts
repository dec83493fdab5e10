// npm run bench:upsert: what POST /v1/contacts/upsert costs against POST /v1/contacts, on the service
// as shipped (production mode, its own fresh PostgreSQL database, Redis), closed loop (wrk, else
// autocannon), BENCH_CONNECTIONS (50) connections for BENCH_DURATION_S (10) s, interleaved over
// BENCH_ROUNDS (3) rounds. Both create a new contact with a name and a new Brazilian mobile on every
// request (POST checks the phone in both forms; the upsert also gives a new externalId, so it holds
// and looks up two keys and finds none); a third run upserts contacts that exist (the update path).
// Target: upsert (create) >= 0.8x POST, by the medians of the same run. Prints a table and writes
// bench/results/runs/upsert-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import os from 'node:os';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { sql } from 'kysely';
import { groupCpuMs, loadAverage, machineCpuMs, pidsCpuMs, pidsWakeups, postgresPids } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, durationS, log, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const rounds = Number(process.env.BENCH_ROUNDS || 3);
const connections = Number(process.env.BENCH_CONNECTIONS || 50);

type Kind = 'post' | 'upsert' | 'found';
/** Contacts that exist for the found run, each upserted in turn. */
const SEEDED = 10_000;
const TITLES: Record<Kind, string> = {
  post: 'POST /v1/contacts',
  upsert: 'POST /v1/contacts/upsert (creates)',
  found: 'POST /v1/contacts/upsert (finds, updates)',
};

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('upsert', 2);
  const workDir = makeWorkDir();
  const rates: Record<Kind, number[]> = { post: [], upsert: [], found: [] };
  // Every request a new phone: 8-digit subscribers from 60,000,000 (POST) and 80,000,000 (upsert), never sent twice.
  const next = { post: 60_000_000, upsert: 80_000_000 };
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench upsert' });
    await sql`
      insert into contacts (workspace_id, id, name, external_id, created_at, updated_at)
      select ${key.workspaceId}::uuid, gen_random_uuid(), 'Seed ' || i, 'seed-' || i, now(), now() from generate_series(0, ${SEEDED - 1}) i`.execute(db);
    const service = await startBenchService('upsert', { DATABASE_URL: databaseUrl });
    const spec = (kind: Kind, d: number): LoadSpec => {
      const count = Math.max(1_000, 4_000 * d);
      // The found run upserts the contacts seeded below (by externalId, an attribute changed).
      const from = kind === 'found' ? 0 : next[kind];
      if (kind !== 'found') next[kind] += count;
      return {
        url: `${service.base}/v1/contacts${kind === 'post' ? '' : '/upsert'}`,
        method: 'POST',
        headers: { authorization: `Bearer ${key.apiKey}`, 'Content-Type': 'application/json' },
        variants: Array.from({ length: count }, (_, i) => {
          const phone = `+55119${from + i}`;
          const body =
            kind === 'post'
              ? { name: `Cliente ${i}`, phone: phone.replace('+55119', '+5511') }
              : kind === 'upsert'
                ? { externalId: `crm-${from + i}`, name: `Cliente ${i}`, phone: phone.replace('+55119', '+5511') }
                : { externalId: `seed-${i % SEEDED}`, attributes: { visto: i } };
          return { body: JSON.stringify(body) };
        }),
        connections,
        durationS: d,
      };
    };
    await runLoad(spec('post', 2), workDir);
    await runLoad(spec('upsert', 2), workDir);
    for (let round = 1; round <= rounds; round++) {
      const order: Kind[] = round % 2 ? ['post', 'upsert', 'found'] : ['upsert', 'post', 'found'];
      for (const kind of order) {
        const postgres = postgresPids();
        // The service's own backends: on a shared machine PostgreSQL's other work is not the service's.
        const own = (
          await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`.execute(db)
        ).rows.map((row) => row.pid);
        const [service0, postgres0, own0, wakeups0, machine0] = [
          groupCpuMs(service.child.pid!),
          pidsCpuMs(postgres),
          pidsCpuMs(own),
          pidsWakeups(own),
          machineCpuMs(),
        ];
        const result = await runLoad(spec(kind, durationS), workDir);
        const perRequest = (ms: number) => ((ms * 1000) / result.requests).toFixed(0);
        const machine1 = machineCpuMs();
        const cpu = `CPU µs a request: service ${perRequest(groupCpuMs(service.child.pid!) - service0)}, PostgreSQL ${perRequest(pidsCpuMs(postgres) - postgres0)} (the service's backends ${perRequest(pidsCpuMs(own) - own0)}, ${((pidsWakeups(own) - wakeups0) / result.requests).toFixed(2)} wake-ups), machine ${perRequest(machine1.busy - machine0.busy)}`;
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${kind}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        rates[kind].push(result.rps);
        log(`round ${round}, ${TITLES[kind]}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms; ${cpu}`);
      }
    }
    await stopProcess(service.child);
  } finally {
    await stopAll();
    await drop();
  }
  const [post, upsert, found] = [median(rates.post), median(rates.upsert), median(rates.found)];
  const ratio = upsert / post;
  const table = [
    '| measurement | result | target | |',
    '|---|---|---|---|',
    `| POST /v1/contacts/upsert creating (externalId + phone) against POST /v1/contacts (phone), medians of ${rounds} rounds | ${ratio.toFixed(2)}x (${upsert.toFixed(0)} against ${post.toFixed(0)} req/s; rounds ${rates.upsert.map((r, i) => (r / rates.post[i]!).toFixed(2)).join(', ')}) | >= 0.8x | ${ratio >= 0.8 ? 'met' : 'missed'} |`,
    `| POST /v1/contacts/upsert finding (externalId, one attribute changed) against POST /v1/contacts | ${(found / post).toFixed(2)}x (${found.toFixed(0)} req/s) | | |`,
  ].join('\n');
  log(`\n${table}`);
  const machine = `${connections} connections, ${durationS} s a run, ${rounds} rounds, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('upsert', `# Upsert bench ${stamp}\n\n${machine}\n\n${table}\n`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:upsert failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
