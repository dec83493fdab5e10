// The response-time report: count, mean and interpolated percentiles (PostgreSQL's percentile_cont)
// of the responses and closings that happened in a window, from the metric rows written when they
// happened (clocks.ts), never from the messages. The window's whole days that have ended come from
// the rollups (rollups.ts: at most 18 blocks per group and metric, whatever the window's length),
// the rest (its first and last part days, today) from the metric rows (sla_metrics_window_idx
// covers every column read). Count, mean, byAi/byHuman and % within SLA are exact. Percentiles are
// exact (percentile_cont's, computed here) when the window holds at most EXACT_UP_TO responses and
// closings, and for each whole day of groupBy=day; otherwise they are read from the blocks'
// histograms, within 2 % (or 0.02 s) of the exact figure.
import { sql, type RawBuilder } from 'kysely';
import type { components, operations } from '../../generated/api.js';
import type { Db } from '../db/database.js';
import { ApiError } from '../errors.js';
import { loadSettings } from '../services/settings.js';
import { blocksOf, bucketBounds, bucketOf, ENDED_AFTER, ensureBuilt } from './rollups.js';
import { instantToIso, parseInstant } from '../time.js';

type Report = components['schemas']['ResponseTimesReport'];
type Figures = components['schemas']['ResponseTimeFigures'];
type Totals = components['schemas']['ResponseTimes'];
export type GroupBy = NonNullable<NonNullable<operations['getResponseTimesReport']['parameters']['query']>['groupBy']>;

/** The longest window a report covers, in days. */
export const MAX_WINDOW_DAYS = 366;
const MICROS_PER_DAY = 86_400_000_000n;

const invalid = (path: string, message: string): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path, message }]);

/** The report's window [from, to] as ISO instants, or the 400 it deserves. */
export function reportWindow(dateFrom: string, dateTo: string): { from: string; to: string } {
  const from = parseInstant(dateFrom);
  if (from === undefined) throw invalid('/query/dateFrom', 'must match format "date-time"');
  const to = parseInstant(dateTo);
  if (to === undefined) throw invalid('/query/dateTo', 'must match format "date-time"');
  if (from > to) throw invalid('/query/dateFrom', 'must not be after dateTo');
  if (to - from > BigInt(MAX_WINDOW_DAYS) * MICROS_PER_DAY) throw invalid('/query/dateTo', `must be at most ${MAX_WINDOW_DAYS} days after dateFrom`);
  return { from: instantToIso(from), to: instantToIso(to) };
}

type Metric = components['schemas']['SlaMetric'];

const EMPTY: Figures = { count: 0, meanSeconds: null, p50Seconds: null, p90Seconds: null };
const round = (value: number): number => Math.round(value * 1000) / 1000;

/** Up to this many responses and closings in the window, every percentile is exact (the rows are read, ~10 ms). */
export const EXACT_UP_TO = 10_000;

/** One group's figures of one metric as they add up. */
interface Acc {
  n: number;
  ai: number;
  human: number;
  within: number;
  timed: number;
  sum: number;
  /** Durations read one by one (the metric rows). */
  values: number[];
  /** Histogram of the durations counted by blocks: bucket -> count. */
  hist: Map<number, number>;
  blocks: number;
  /** A whole day's exact p50 and p90, when the group is that one day. */
  exact: [number, number] | null;
}

const newAcc = (): Acc => ({ n: 0, ai: 0, human: 0, within: 0, timed: 0, sum: 0, values: [], hist: new Map(), blocks: 0, exact: null });

/** percentile_cont over sorted values. */
function percentileCont(sorted: readonly number[], p: number): number {
  const x = p * (sorted.length - 1);
  const low = Math.floor(x);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low]! + (x - low) * (sorted[high]! - sorted[low]!);
}

/**
 * percentile_cont read from a histogram: the k-th smallest of a bucket's c durations is taken at
 * (k + 0.5) / c of its width, and ranks in between are interpolated as percentile_cont does.
 */
function percentileOfHistogram(hist: Map<number, number>, n: number, p: number): number {
  const buckets = [...hist.entries()].sort((a, b) => a[0] - b[0]);
  const valueAt = (rank: number): number => {
    let before = 0;
    for (const [bucket, count] of buckets) {
      if (rank < before + count) {
        const [low, high] = bucketBounds(bucket);
        return low + ((high - low) * (rank - before + 0.5)) / count;
      }
      before += count;
    }
    const [low] = bucketBounds(buckets.at(-1)![0]);
    return low;
  };
  const x = p * (n - 1);
  const low = Math.floor(x);
  const a = valueAt(low);
  return x === low ? a : a + (x - low) * (valueAt(low + 1) - a);
}

function figuresOfAcc(acc: Acc | undefined): Figures {
  if (!acc || acc.n === 0) return EMPTY;
  let p: [number, number];
  if (acc.blocks === 0) {
    const sorted = [...acc.values].sort((a, b) => a - b);
    p = [percentileCont(sorted, 0.5), percentileCont(sorted, 0.9)];
  } else if (acc.exact && acc.blocks === 1 && acc.values.length === 0) {
    p = acc.exact;
  } else {
    const hist = new Map(acc.hist);
    for (const value of acc.values) {
      const bucket = bucketOf(value);
      hist.set(bucket, (hist.get(bucket) ?? 0) + 1);
    }
    p = [percentileOfHistogram(hist, acc.n, 0.5), percentileOfHistogram(hist, acc.n, 0.9)];
  }
  return { count: acc.n, meanSeconds: round(acc.sum / acc.n), p50Seconds: round(p[0]), p90Seconds: round(p[1]) };
}

function totalsOf(accs: Map<Metric, Acc> | undefined): Totals {
  const first = accs?.get('firstResponse');
  let within = 0;
  let timed = 0;
  for (const acc of accs?.values() ?? []) {
    within += acc.within;
    timed += acc.timed;
  }
  return {
    firstResponse: { ...figuresOfAcc(first), byAi: first?.ai ?? 0, byHuman: first?.human ?? 0 },
    nextResponse: figuresOfAcc(accs?.get('nextResponse')),
    resolution: figuresOfAcc(accs?.get('resolution')),
    slaAchievedPercent: timed === 0 ? null : Math.round((1000 * within) / timed) / 10,
  };
}

const DIMENSION: Record<Exclude<GroupBy, 'day'>, 'agent_id' | 'channel_id' | 'stage_id'> = { agent: 'agent_id', channel: 'channel_id', stage: 'stage_id' };

/** A metric row as the report reads it. */
interface MetricRow {
  key: string | null;
  metric: Metric;
  d: number;
  by_ai: boolean | null;
  within_sla: boolean | null;
}

/** A block row as the report reads it. */
interface BlockRow {
  dim: 'total' | 'agent' | 'channel' | 'stage' | 'day';
  key: string;
  start: number;
  metric: Metric;
  n: number;
  n_ai: number;
  n_human: number;
  within: number;
  timed: number;
  sum: number;
  /** The histogram's buckets and counts, comma-separated (text reads much faster than arrays). */
  hb: string | null;
  hn: string | null;
  /** A whole day's exact p50,p90. */
  p: string | null;
}

/** The report of the workspace over [from, to] (both inclusive), broken down by `groupBy` when given. */
export async function responseTimes(
  db: Db,
  workspaceId: string,
  window: { from: string; to: string },
  options: { groupBy?: GroupBy | undefined; businessHours: boolean; exactUpTo?: number },
): Promise<Report> {
  const groupBy = options.groupBy;
  const { timezone } = await loadSettings(db, workspaceId);
  const duration = options.businessHours ? sql`business_seconds` : sql`seconds`;
  const keyOf = (): RawBuilder<unknown> =>
    groupBy === undefined
      ? sql`null::text`
      : groupBy === 'day'
        ? sql`to_char(happened_at at time zone ${timezone}, 'YYYY-MM-DD')`
        : sql`${sql.ref(DIMENSION[groupBy])}::text`;

  // The window's whole days that the blocks hold, [first, end): one round trip, unless days ended
  // since the rollups were last built (then they are built first).
  const windowDays = async (built: number | null | undefined) =>
    (
      await sql<{ first: number; end: number; first_at: string; end_at: string; built_until: number | null; ended: number }>`
        select x.first, x.end, x.built_until, x.ended,
               case when x.end > x.first then sla_day_start(x.first, ${timezone}) end as first_at,
               case when x.end > x.first then sla_day_start(x.end, ${timezone}) end as end_at
          from (select case when sla_day_start(sla_day(${window.from}::timestamptz, ${timezone}), ${timezone}) = ${window.from}::timestamptz
                            then sla_day(${window.from}::timestamptz, ${timezone}) else sla_day(${window.from}::timestamptz, ${timezone}) + 1 end as first,
                       least(sla_day(${window.to}::timestamptz, ${timezone}), coalesce(${built ?? null}::int, s.built_until, -1000000000)) as end,
                       s.built_until, sla_day(now() - ${ENDED_AFTER}::interval, ${timezone}) as ended
                  from (select 1) one left join sla_report_state s on s.workspace_id = ${workspaceId} and s.tz = ${timezone}) x`.execute(db)
    ).rows[0]!;
  let days = await windowDays(undefined);
  let builtUntil: number | undefined = days.built_until ?? undefined;
  if (days.built_until === null || days.built_until < days.ended) {
    builtUntil = await ensureBuilt(db, workspaceId, timezone);
    days = await windowDays(builtUntil ?? -1_000_000_000);
  }
  const useBlocks = builtUntil !== undefined && days.end > days.first;

  const readRows = async (whole: boolean): Promise<MetricRow[]> => {
    const where =
      whole || !useBlocks
        ? sql`happened_at between ${window.from}::timestamptz and ${window.to}::timestamptz`
        : sql`((happened_at >= ${window.from}::timestamptz and happened_at < ${days.first_at}::timestamptz)
             or (happened_at >= ${days.end_at}::timestamptz and happened_at <= ${window.to}::timestamptz))`;
    const { rows } = await sql<MetricRow>`
      select ${keyOf()} as key, metric, ${duration} as d, by_ai, within_sla
        from sla_metrics where workspace_id = ${workspaceId} and ${where}`.execute(db);
    return rows;
  };

  let blockRows: BlockRow[] = [];
  if (useBlocks) {
    const blocks = blocksOf(days.first, days.end);
    const hist = options.businessHours
      ? sql`array_to_string(hb_b, ',') as hb, array_to_string(hb_n, ',') as hn`
      : sql`array_to_string(hs_b, ',') as hb, array_to_string(hs_n, ',') as hn`;
    const sum = options.businessHours ? sql`sum_b` : sql`sum_s`;
    const dims = groupBy === undefined || groupBy === 'day' ? ['total'] : ['total', groupBy];
    const { rows } = await sql<BlockRow>`
      select b.dim, b.key, b.start, b.metric, b.n, b.n_ai, b.n_human, b.within, b.timed, b.${sum} as sum, ${hist}, null as p
        from unnest(${blocks.map((b) => b.level)}::int[], ${blocks.map((b) => b.start)}::int[]) q (level, start)
        join sla_report_blocks b on b.workspace_id = ${workspaceId} and b.level = q.level and b.start = q.start
       where b.dim = any(${dims}::text[])`.execute(db);
    blockRows = rows;
    if (groupBy === 'day') {
      const p = options.businessHours ? sql`array_to_string(p_b, ',')` : sql`array_to_string(p_s, ',')`;
      const { rows: dayRows } = await sql<BlockRow>`
        select 'day' as dim, '' as key, start, metric, n, n_ai, n_human, within, timed, ${sum} as sum, null as hb, null as hn, ${p} as p
          from sla_report_blocks
         where workspace_id = ${workspaceId} and level = 0 and dim = 'total' and start >= ${days.first} and start < ${days.end}`.execute(db);
      blockRows.push(...dayRows);
    }
  }
  let metricRows = await readRows(false);
  const inBlocks = blockRows.reduce((n, row) => (row.dim === 'total' ? n + row.n : n), 0);
  if (useBlocks && inBlocks + metricRows.length <= (options.exactUpTo ?? EXACT_UP_TO)) {
    blockRows = [];
    metricRows = await readRows(true);
  }

  const total = new Map<Metric, Acc>();
  const groups = new Map<string | null, Map<Metric, Acc>>();
  const accOf = (key: string | null | undefined, metric: Metric): Acc => {
    let accs = total;
    if (key !== undefined) {
      accs = groups.get(key) ?? new Map<Metric, Acc>();
      groups.set(key, accs);
    }
    let acc = accs.get(metric);
    if (!acc) accs.set(metric, (acc = newAcc()));
    return acc;
  };
  for (const row of blockRows) {
    const key = row.dim === 'total' ? undefined : row.dim === 'day' ? new Date(row.start * 86_400_000).toISOString().slice(0, 10) : row.key || null;
    const acc = accOf(key, row.metric);
    acc.n += row.n;
    acc.ai += row.n_ai;
    acc.human += row.n_human;
    acc.within += row.within;
    acc.timed += row.timed;
    acc.sum += row.sum;
    acc.blocks++;
    if (row.p) {
      const [p50, p90] = row.p.split(',').map(Number);
      acc.exact = [p50!, p90!];
    }
    if (row.hb && row.hn) {
      const buckets = row.hb.split(',');
      const counts = row.hn.split(',');
      for (let i = 0; i < buckets.length; i++) {
        const bucket = Number(buckets[i]);
        acc.hist.set(bucket, (acc.hist.get(bucket) ?? 0) + Number(counts[i]));
      }
    }
  }
  for (const row of metricRows) {
    for (const key of groupBy === undefined ? [undefined] : [undefined, row.key]) {
      const acc = accOf(key, row.metric);
      acc.n++;
      if (row.by_ai === true) acc.ai++;
      if (row.by_ai === false) acc.human++;
      if (row.within_sla === true) acc.within++;
      if (row.within_sla !== null) acc.timed++;
      acc.sum += row.d;
      acc.values.push(row.d);
    }
  }
  const keys = [...groups.keys()].sort((a, b) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : a > b ? 1 : 0));
  return { data: keys.map((key) => ({ key, ...totalsOf(groups.get(key)) })), total: totalsOf(total) };
}
