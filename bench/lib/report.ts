// Medians over rounds, ratios to the baseline, the target checks, and the Markdown of a bench run.
import type { LoadResult } from './load.js';

export interface CpuUse {
  /** The measured server's processes (the whole process group: primary and workers). */
  server: number;
  /** PostgreSQL backends connected to the bench database. */
  pgBackends: number;
  /** PostgreSQL's own background processes (WAL writer, checkpointer, ...), shared with other users. */
  pgBackground: number;
  redis: number;
  loadgen: number;
  /** Everything else on the machine in the same window (other users' work: the noise). */
  others: number;
  machineBusy: number;
  machineTotal: number;
}

export interface Run {
  scenario: string;
  round: number;
  result: LoadResult;
  /** CPU ms over the run. */
  cpuMs: CpuUse;
  loadAverage: number;
}

export interface ScenarioInfo {
  id: string;
  title: string;
  /** Which runs this one is compared with (a's scenario id), if any. */
  ratioTo?: string;
}

export const median = (values: number[]): number => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export interface ScenarioSummary {
  id: string;
  title: string;
  tool: string;
  connections: number;
  rate?: number | undefined;
  rounds: number;
  rps: number;
  rpsPerRound: number[];
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  ratio?: number | undefined;
  ratioPerRound?: number[] | undefined;
  /** Median CPU µs per request by component. */
  cpuUsPerRequest: Record<keyof CpuUse, number>;
  /** Median share of the machine's CPU used by other users' processes during the runs. */
  othersShare: number;
}

const COMPONENTS: Array<keyof CpuUse> = ['server', 'pgBackends', 'pgBackground', 'redis', 'loadgen', 'others', 'machineBusy', 'machineTotal'];

export function summarise(runs: Run[], info: ScenarioInfo): ScenarioSummary | undefined {
  const mine = runs.filter((r) => r.scenario === info.id).sort((a, b) => a.round - b.round);
  if (mine.length === 0) return undefined;
  const base = info.ratioTo ? runs.filter((r) => r.scenario === info.ratioTo) : [];
  const ratioPerRound = base.length
    ? mine.flatMap((run) => {
        const other = base.find((b) => b.round === run.round);
        return other ? [run.result.rps / other.result.rps] : [];
      })
    : undefined;
  const cpuUsPerRequest = Object.fromEntries(
    COMPONENTS.map((c) => [c, median(mine.map((r) => (r.cpuMs[c] * 1000) / Math.max(1, r.result.requests)))]),
  ) as Record<keyof CpuUse, number>;
  return {
    id: info.id,
    title: info.title,
    tool: mine[0]!.result.tool,
    connections: mine[0]!.result.connections,
    rate: mine[0]!.result.rate,
    rounds: mine.length,
    rps: median(mine.map((r) => r.result.rps)),
    rpsPerRound: mine.map((r) => r.result.rps),
    p50Ms: median(mine.map((r) => r.result.p50Ms)),
    p99Ms: median(mine.map((r) => r.result.p99Ms)),
    non2xx: mine.reduce((sum, r) => sum + r.result.non2xx, 0),
    socketErrors: mine.reduce((sum, r) => sum + r.result.socketErrors, 0),
    ratio: base.length ? median(mine.map((r) => r.result.rps)) / median(base.map((r) => r.result.rps)) : undefined,
    ratioPerRound,
    cpuUsPerRequest,
    othersShare: median(mine.map((r) => r.cpuMs.others / Math.max(1, r.cpuMs.machineTotal))),
  };
}

const n0 = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const n1 = (x: number | undefined): string => (x !== undefined && Number.isFinite(x) ? x.toFixed(1) : '–');
const n2 = (x: number | undefined): string => (x !== undefined && Number.isFinite(x) ? x.toFixed(2) : '–');

/** CPU µs per request of everything the run needs: server, PostgreSQL, Redis and the load generator. */
export const ownCpuUs = (s: ScenarioSummary): number =>
  s.cpuUsPerRequest.server + s.cpuUsPerRequest.pgBackends + s.cpuUsPerRequest.pgBackground + s.cpuUsPerRequest.redis + s.cpuUsPerRequest.loadgen;

export function resultsTable(summaries: ScenarioSummary[], cores: number): string {
  const lines = [
    "| scenario | load | req/s (median) | ratio to (a) | p50 ms | p99 ms | errors | CPU µs/req: server | PostgreSQL | Redis | load gen | all | ceiling req/s | other users' CPU |",
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of summaries) {
    const load = s.rate ? `${s.rate}/s fixed, ${s.connections} conn (${s.tool})` : `${s.connections} conn (${s.tool})`;
    const ratio = s.ratio === undefined ? '' : `${n2(s.ratio)}x`;
    const pg = s.cpuUsPerRequest.pgBackends + s.cpuUsPerRequest.pgBackground;
    lines.push(
      `| ${s.title} | ${load} | ${n0(s.rps)} | ${ratio} | ${n1(s.p50Ms)} | ${n1(s.p99Ms)} | ${s.non2xx + s.socketErrors} | ` +
        `${n0(s.cpuUsPerRequest.server)} | ${n0(pg)} | ${n0(s.cpuUsPerRequest.redis)} | ${n0(s.cpuUsPerRequest.loadgen)} | ` +
        `${n0(ownCpuUs(s))} | ${n0((cores * 1e6) / ownCpuUs(s))} | ${(s.othersShare * 100).toFixed(0)}% |`,
    );
  }
  return lines.join('\n');
}

export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | undefined;
}

export function targetsTable(checks: TargetCheck[]): string {
  return [
    '| target | measured | met |',
    '|---|---|---|',
    ...checks.map((c) => `| ${c.target} | ${c.measured} | ${c.met === undefined ? 'n/a' : c.met ? 'yes' : '**no**'} |`),
  ].join('\n');
}

export const fmt = { n0, n1, n2 };
