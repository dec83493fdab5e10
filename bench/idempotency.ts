// npm run bench:idempotency: what an Idempotency-Key costs. POST /v1/contacts against the service as
// shipped (production mode, its own fresh PostgreSQL database, Redis), closed loop (wrk, else
// autocannon), BENCH_CONNECTIONS (50) connections for BENCH_DURATION_S (10) s, without a key and with
// a fresh key on every request (each does the key's whole work: lock, lookup, store; none is a
// cheaper replay), interleaved over BENCH_ROUNDS (3) rounds. Target: with a key >= 0.85x the rate
// without, by the medians of the same run. Prints a table and writes
// bench/results/runs/idempotency-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { sql } from 'kysely';
import { groupCpuMs, loadAverage, machineCpuMs, pidsCpuMs, pidsWakeups, postgresPids } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, durationS, log, profiledWindow, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const rounds = Number(process.env.BENCH_ROUNDS || 3);
/** BENCH_IDEMPOTENCY_PROFILE=<prefix>: CPU profiles of the service over the last round, <prefix>-plain.cpuprofile and <prefix>-key.cpuprofile. */
const profile = process.env.BENCH_IDEMPOTENCY_PROFILE ? path.resolve(process.env.BENCH_IDEMPOTENCY_PROFILE) : undefined;
const connections = Number(process.env.BENCH_CONNECTIONS || 50);

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('idempotency', 2);
  const workDir = makeWorkDir();
  const rates: Record<'plain' | 'key', number[]> = { plain: [], key: [] };
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench idempotency' });
    const hookOutput = profile && `${profile}.hook.cpuprofile`;
    const service = await startBenchService(
      'idempotency',
      { DATABASE_URL: databaseUrl, ...(hookOutput && { BENCH_CPU_PROFILE: hookOutput }) },
      hookOutput ? ['--import', './bench/cpu-profile-hook.ts'] : [],
    );
    const spec = (withKey: boolean, d: number): LoadSpec => ({
      url: `${service.base}/v1/contacts`,
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}`, 'Content-Type': 'application/json' },
      // A fresh key per request (more variants than the run can send). Without a key the requests
      // are the same but for the header's name (one the service ignores), so the load generator
      // does the same work for both and the difference is the service's.
      variants: Array.from({ length: Math.max(1_000, 4_000 * d) }, (_, i) => ({
        body: JSON.stringify({ name: `Cliente ${i}` }),
        headers: { [withKey ? 'Idempotency-Key' : 'X-Bench-Nonce']: randomUUID() },
      })),
      connections,
      durationS: d,
    });
    await runLoad(spec(false, 2), workDir);
    await runLoad(spec(true, 2), workDir);
    for (let round = 1; round <= rounds; round++) {
      const order: Array<'plain' | 'key'> = round % 2 ? ['plain', 'key'] : ['key', 'plain'];
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
        const load = () => runLoad(spec(kind === 'key', durationS), workDir);
        const result =
          hookOutput && round === rounds ? await profiledWindow(service.child.pid!, hookOutput, `${profile}-${kind}.cpuprofile`, load) : await load();
        const perRequest = (ms: number) => ((ms * 1000) / result.requests).toFixed(0);
        const machine1 = machineCpuMs();
        const cpu = `CPU µs a request: service ${perRequest(groupCpuMs(service.child.pid!) - service0)}, PostgreSQL ${perRequest(pidsCpuMs(postgres) - postgres0)} (the service's backends ${perRequest(pidsCpuMs(own) - own0)}, ${((pidsWakeups(own) - wakeups0) / result.requests).toFixed(2)} wake-ups), machine ${perRequest(machine1.busy - machine0.busy)}`;
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${kind}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        rates[kind].push(result.rps);
        log(
          `round ${round}, ${kind === 'key' ? 'with a key' : 'without a key'}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms; ${cpu}`,
        );
      }
    }
    await stopProcess(service.child);
  } finally {
    await stopAll();
    await drop();
  }
  const [plain, withKey] = [median(rates.plain), median(rates.key)];
  const ratio = withKey / plain;
  const table = [
    '| measurement | result | target | |',
    '|---|---|---|---|',
    `| POST /v1/contacts with a fresh Idempotency-Key against without, medians of ${rounds} rounds | ${ratio.toFixed(2)}x (${withKey.toFixed(0)} against ${plain.toFixed(0)} req/s; rounds ${rates.key.map((r, i) => (r / rates.plain[i]!).toFixed(2)).join(', ')}) | >= 0.85x | ${ratio >= 0.85 ? 'met' : 'missed'} |`,
  ].join('\n');
  log(`\n${table}`);
  const machine = `${connections} connections, ${durationS} s a run, ${rounds} rounds, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('idempotency', `# Idempotency bench ${stamp}\n\n${machine}\n\n${table}\n`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:idempotency failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
