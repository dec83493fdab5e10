// npm run bench:metrics: what the metrics cost. GET /v1/agents against two instances of the service
// as shipped (production mode, one fresh PostgreSQL database, Redis), one with METRICS_ENABLED=false
// and one with its metrics on and scraped every BENCH_SCRAPE_S (5) s as Prometheus would, closed
// loop (wrk, else autocannon), BENCH_CONNECTIONS (50) connections for BENCH_DURATION_S (10) s a run,
// alternating off/on over BENCH_ROUNDS (4) rounds (the machine is shared: each round's pair is close
// in time). Target: on >= 0.95x off, by the medians of the same run; every round is printed, with
// each instance's CPU time a request (/proc: what load on a shared machine stretches least), whose
// medians are compared too. BENCH_PROFILE=1 also profiles both instances through the last round
// (bench/cpu-profile-hook.ts) and says how many µs of a request's CPU went to the metrics' own code
// (prom-client and src/metrics/, the scrapes and Node's default metrics included). Writes
// bench/results/runs/metrics-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { groupCpuMs, loadAverage } from './lib/cpu.js';
import { makeWorkDir, runLoad, type LoadSpec } from './lib/load.js';
import { httpStatus, sleep, stopAll, stopProcess } from './lib/processes.js';
import { benchDatabase, durationS, log, startBenchService, stamp, writeReport } from './lib/service-bench.js';
import type { CpuProfile } from './profile.js';

const rounds = Number(process.env.BENCH_ROUNDS || 4);
const connections = Number(process.env.BENCH_CONNECTIONS || 50);
const scrapeS = Number(process.env.BENCH_SCRAPE_S || 5);
const profiling = process.env.BENCH_PROFILE === '1';

type Side = 'off' | 'on';

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};

/** Frames of the metrics' own code: prom-client (and what it alone loads) and src/metrics/. */
const METRICS_CODE = /\/node_modules\/(prom-client|tdigest|bintrees|@opentelemetry\/api)\/|\/src\/metrics\//;

/**
 * The share of the profile's busy (non-idle) time spent in the metrics' own code: a sample counts when
 * the innermost frame of a file (Node's internals and natives count for the code that called them) is
 * the metrics'. (The middleware calls the rest of the pipeline: what runs under it is not its cost.)
 */
function metricsShare(profile: CpuProfile): { share: number; busyMs: number } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const inMetrics = new Map<number, boolean>();
  const owner = (id: number): boolean => {
    let known = inMetrics.get(id);
    if (known === undefined) {
      const { url } = byId.get(id)!.callFrame;
      const up = parent.get(id);
      known = url === '' || url.startsWith('node:') ? up !== undefined && owner(up) : METRICS_CODE.test(url);
      inMetrics.set(id, known);
    }
    return known;
  };
  let busy = 0;
  let metrics = 0;
  profile.samples.forEach((id, i) => {
    const us = Math.max(0, profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0);
    const name = byId.get(id)!.callFrame.functionName;
    if (name === '(idle)') return;
    busy += us;
    if (owner(id)) metrics += us;
  });
  return { share: busy ? metrics / busy : 0, busyMs: busy / 1000 };
}

async function waitForFile(file: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${file}`);
    await sleep(50);
  }
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('metrics', 2);
  const workDir = makeWorkDir();
  const rates: Record<Side, number[]> = { off: [], on: [] };
  const cpus: Record<Side, number[]> = { off: [], on: [] };
  const profiled: Partial<Record<Side, { usPerRequest: number; share: number; metricsUs: number }>> = {};
  const profileDir = profiling ? fs.mkdtempSync(path.join(os.tmpdir(), 'sf-bench-metrics-')) : '';
  const profileFile = (side: Side): string => path.join(profileDir, `metrics-${side}.cpuprofile`);
  const lines: string[] = [];
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench metrics' });
    const services = {
      off: await startBenchService(
        'metrics-off',
        { DATABASE_URL: databaseUrl, METRICS_ENABLED: 'false', ...(profiling && { BENCH_CPU_PROFILE: profileFile('off') }) },
        profiling ? ['--import', './bench/cpu-profile-hook.ts'] : [],
      ),
      on: await startBenchService(
        'metrics-on',
        { DATABASE_URL: databaseUrl, ...(profiling && { BENCH_CPU_PROFILE: profileFile('on') }) },
        profiling ? ['--import', './bench/cpu-profile-hook.ts'] : [],
      ),
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
        const pid = services[side].child.pid!;
        const profile = profiling && round === rounds;
        if (profile) {
          process.kill(pid, 'SIGUSR2');
          await waitForFile(`${profileFile(side)}.started`, 10_000);
        }
        const scraper = side === 'on' ? setInterval(() => void httpStatus(`${services.on.base}/metrics`), scrapeS * 1000) : undefined;
        const cpu0 = groupCpuMs(pid);
        const result = await runLoad(spec(side, durationS), workDir);
        clearInterval(scraper);
        if (result.non2xx + result.socketErrors > 0) throw new Error(`${side}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        const cpuUs = ((groupCpuMs(pid) - cpu0) * 1000) / result.requests;
        rates[side].push(result.rps);
        cpus[side].push(cpuUs);
        const line = `round ${round}, metrics ${side}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, service CPU ${cpuUs.toFixed(0)} µs a request (${result.tool}, load average ${loadAverage().toFixed(1)})`;
        lines.push(line);
        log(line);
        if (profile) {
          process.kill(pid, 'SIGUSR2');
          await waitForFile(profileFile(side), 60_000);
          const { share } = metricsShare(JSON.parse(fs.readFileSync(profileFile(side), 'utf8')) as CpuProfile);
          profiled[side] = { usPerRequest: cpuUs, share, metricsUs: share * cpuUs };
          const said = `  profiled (${side}): the metrics' own code ${(share * 100).toFixed(2)} % of the busy samples, ${(share * cpuUs).toFixed(1)} µs of the ${cpuUs.toFixed(0)} µs a request (${profileFile(side)})`;
          lines.push(said);
          log(said);
        }
      }
    }
    await Promise.all([stopProcess(services.off.child), stopProcess(services.on.child)]);
  } finally {
    await stopAll();
    await drop();
  }
  const [off, on] = [median(rates.off), median(rates.on)];
  const ratio = on / off;
  const [cpuOff, cpuOn] = [median(cpus.off), median(cpus.on)];
  const cpuRatio = cpuOff / cpuOn;
  const table = [
    '| measurement | result | target | |',
    '|---|---|---|---|',
    `| GET /v1/agents with metrics on (scraped every ${scrapeS} s) against off, medians of ${rounds} rounds | ${ratio.toFixed(2)}x (${on.toFixed(0)} against ${off.toFixed(0)} req/s; rounds ${rates.on.map((r, i) => (r / rates.off[i]!).toFixed(2)).join(', ')}) | >= 0.95x | ${ratio >= 0.95 ? 'met' : 'missed'} |`,
    `| the same as CPU: service CPU a request, off / on, medians | ${cpuRatio.toFixed(2)}x (${cpuOn.toFixed(0)} against ${cpuOff.toFixed(0)} µs; rounds ${cpus.on.map((c, i) => (cpus.off[i]! / c).toFixed(2)).join(', ')}) | >= 0.95x | ${cpuRatio >= 0.95 ? 'met' : 'missed'} |`,
    ...(profiled.on
      ? [
          `| the metrics' own code in a request's CPU, profiled (round ${rounds}; the same target as a share) | on ${profiled.on.metricsUs.toFixed(1)} µs of ${profiled.on.usPerRequest.toFixed(0)} (${(profiled.on.share * 100).toFixed(2)} %)${profiled.off ? `; off ${profiled.off.metricsUs.toFixed(1)} µs` : ''} | < 5 % | ${profiled.on.share < 0.05 ? 'met' : 'missed'} |`,
        ]
      : []),
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
