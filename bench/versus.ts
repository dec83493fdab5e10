// npx tsx bench/versus.ts: a read path of this checkout against the same of another checkout (an
// older commit, say, to show a change made it no slower). BENCH_OTHER_DIR is the other checkout (a
// git worktree with its node_modules: `git worktree add --detach ../before <commit>`, then link or
// install node_modules); BENCH_PATH the GET it sends (/v1/agents). Each side runs as shipped
// (production mode, Redis) on a fresh PostgreSQL database of its own, migrated by its own code;
// both get the same workspace, key and 20 agents. Closed loop (wrk, else autocannon),
// BENCH_CONNECTIONS (50) connections for BENCH_DURATION_S (10) s a run, alternating over
// BENCH_ROUNDS (4) rounds (each pair close in time on a shared machine). Prints every round (rate,
// p50, p99, each service's CPU a request from /proc) and the medians' ratios, this / other.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { sql } from 'kysely';
import { provision, SCOPES } from '../src/provisioning.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, durationS, log, startBenchService, type BenchDatabase, type BenchService } from './lib/service-bench.js';

const otherDir = process.env.BENCH_OTHER_DIR;
const target = process.env.BENCH_PATH || '/v1/agents';
const rounds = Number(process.env.BENCH_ROUNDS || 4);
const connections = Number(process.env.BENCH_CONNECTIONS || 50);

type Side = 'this' | 'other';

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};

const commitOf = (dir: string): string => execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();

async function main(): Promise<void> {
  if (!otherDir) throw new Error('BENCH_OTHER_DIR: the other checkout (a git worktree with node_modules)');
  const other = path.resolve(otherDir);
  const databases: Partial<Record<Side, BenchDatabase>> = {};
  const services: Partial<Record<Side, BenchService>> = {};
  const workDir = makeWorkDir();
  const rates: Record<Side, number[]> = { this: [], other: [] };
  const cpus: Record<Side, number[]> = { this: [], other: [] };
  try {
    const keys: Partial<Record<Side, string>> = {};
    for (const side of ['this', 'other'] as const) {
      const database = (databases[side] = await benchDatabase(`versus_${side}`, 2));
      if (side === 'this') await migrateToLatest(database.db);
      else
        execFileSync(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], {
          cwd: other,
          env: { ...process.env, DATABASE_URL: database.databaseUrl },
          stdio: 'ignore',
        });
      const key = await provision(database.db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench versus' });
      await sql`insert into agents (workspace_id, id, type, name, status, instructions, model, created_at, updated_at)
                select ${key.workspaceId}::uuid, gen_random_uuid(), 'ai', 'Agente ' || n, 'active', 'Responda com cordialidade.', 'gpt-4o-mini', now(), now()
                  from generate_series(1, 20) n`.execute(database.db);
      keys[side] = key.apiKey;
      services[side] = await startBenchService(`versus-${side}`, { DATABASE_URL: database.databaseUrl }, [], side === 'this' ? undefined : other);
    }
    const spec = (side: Side, d: number): LoadSpec => ({
      url: `${services[side]!.base}${target}`,
      headers: { authorization: `Bearer ${keys[side]}` },
      connections,
      durationS: d,
    });
    for (const side of ['this', 'other'] as const) await runLoad(spec(side, 2), workDir);
    for (let round = 1; round <= rounds; round++) {
      for (const side of round % 2 ? (['this', 'other'] as const) : (['other', 'this'] as const)) {
        const pid = services[side]!.child.pid!;
        const cpu0 = groupCpuMs(pid);
        const result = await runLoad(spec(side, durationS), workDir);
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${side}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        const cpuUs = ((groupCpuMs(pid) - cpu0) * 1000) / result.requests;
        rates[side].push(result.rps);
        cpus[side].push(cpuUs);
        log(
          `round ${round}, ${side}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, service CPU ${cpuUs.toFixed(0)} µs a request (${result.tool}, load average ${loadAverage().toFixed(1)})`,
        );
      }
    }
    for (const side of ['this', 'other'] as const) await stopProcess(services[side]!.child);
  } finally {
    await stopAll();
    for (const database of Object.values(databases)) await database.drop();
  }
  log(
    JSON.stringify({
      path: `GET ${target}`,
      this: commitOf(process.cwd()),
      other: commitOf(other),
      rate: { this: Math.round(median(rates.this)), other: Math.round(median(rates.other)), ratio: +(median(rates.this) / median(rates.other)).toFixed(3) },
      cpuUsPerRequest: {
        this: Math.round(median(cpus.this)),
        other: Math.round(median(cpus.other)),
        ratio: +(median(cpus.this) / median(cpus.other)).toFixed(3),
      },
      rounds,
      durationS,
      loadAverage: +loadAverage().toFixed(1),
    }),
  );
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench/versus failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
