// npm run bench:metrics: what the metrics cost. GET /v1/agents against two instances of the service
// as shipped (production mode, one fresh PostgreSQL database, Redis), one with METRICS_ENABLED=false
// and one with its metrics on and scraped every BENCH_SCRAPE_S (5) s as Prometheus would, closed
// loop (wrk, else autocannon), BENCH_CONNECTIONS (50) connections for BENCH_DURATION_S (10) s a run,
// alternating off/on over BENCH_ROUNDS (4) rounds (the machine is shared: each round's pair is close
// in time). Target: on >= 0.95x off, by the medians of the same run; every round is printed. Writes
// bench/results/runs/metrics-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import os from 'node:os';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { httpStatus, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, durationS, log, startBenchService, stamp, writeReport } from './lib/service-bench.js';

const rounds = Number(process.env.BENCH_ROUNDS || 4);
const connections = Number(process.env.BENCH_CONNECTIONS || 50);
const scrapeS = Number(process.env.BENCH_SCRAPE_S || 5);

type Side = 'off' | 'on';

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('metrics', 2);
  const workDir = makeWorkDir();
  const rates: Record<Side, number[]> = { off: [], on: [] };
  const lines: string[] = [];
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench metrics' });
    const services = {
      off: await startBenchService('metrics-off', { DATABASE_URL: databaseUrl, METRICS_ENABLED: 'false' }),
      on: await startBenchService('metrics-on', { DATABASE_URL: databaseUrl }),
    };
    if ((await httpStatus(`${services.on.base}/metrics`)) !== 200 || (await httpStatus(`${services.off.base}/metrics`)) !== 404) {
      throw new Error('expected /metrics on one instance and not on the other');
    }
    const spec = (side: Side, d: number): LoadSpec => ({
      url: `${services[side].base}/v1/agents`,
      headers: { authorization: `Bearer ${key.apiKey}` },
      connections,
      durationS: d,
    });
    // Warm both (JIT, pools, the key cache).
    for (const side of ['off', 'on'] as const) await runLoad(spec(side, 2), workDir);
    for (let round = 1; round <= rounds; round++) {
      const order: Side[] = round % 2 ? ['off', 'on'] : ['on', 'off'];
      for (const side of order) {
        const scraper = side === 'on' ? setInterval(() => void httpStatus(`${services.on.base}/metrics`), scrapeS * 1000) : undefined;
        const cpu0 = groupCpuMs(services[side].child.pid!);
        const result = await runLoad(spec(side, durationS), workDir);
        clearInterval(scraper);
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${side}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        const cpuUs = ((groupCpuMs(services[side].child.pid!) - cpu0) * 1000) / result.requests;
        rates[side].push(result.rps);
        const line = `round ${round}, metrics ${side}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, service CPU ${cpuUs.toFixed(0)} µs a request (${result.tool}, load average ${loadAverage().toFixed(1)})`;
        lines.push(line);
        log(line);
      }
    }
    await Promise.all([stopProcess(services.off.child), stopProcess(services.on.child)]);
  } finally {
    await stopAll();
    await drop();
  }
  const [off, on] = [median(rates.off), median(rates.on)];
  const ratio = on / off;
  const table = [
    '| measurement | result | target | |',
    '|---|---|---|---|',
    `| GET /v1/agents with metrics on (scraped every ${scrapeS} s) against off, medians of ${rounds} rounds | ${ratio.toFixed(2)}x (${on.toFixed(0)} against ${off.toFixed(0)} req/s; rounds ${rates.on.map((r, i) => (r / rates.off[i]!).toFixed(2)).join(', ')}) | >= 0.95x | ${ratio >= 0.95 ? 'met' : 'missed'} |`,
  ].join('\n');
  log(`\n${table}`);
  const machine = `${connections} connections, ${durationS} s a run, ${rounds} rounds alternating off/on, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('metrics', `# Metrics bench ${stamp}\n\n${machine}\n\n${lines.map((l) => `- ${l}`).join('\n')}\n\n${table}\n`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:metrics failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
