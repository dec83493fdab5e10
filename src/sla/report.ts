// The response-time report: count, mean and interpolated percentiles (PostgreSQL's percentile_cont)
// of the responses and closings that happened in a window, from the metric rows written when they
// happened (clocks.ts), never from the messages. One statement: the window's rows come from
// sla_metrics_window_idx (which covers every column read), grouped by metric and key and by metric
// alone (the total) in one pass.
import { sql, type RawBuilder } from 'kysely';
import type { components, operations } from '../../generated/api.js';
import type { Db } from '../db/database.js';
import { ApiError } from '../errors.js';
import { loadSettings } from '../services/settings.js';
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

interface Row {
  total: boolean;
  key: string | null;
  metric: components['schemas']['SlaMetric'];
  count: number;
  mean: number | null;
  /** p50 and p90 (one sort for both). */
  p: [number, number] | null;
  by_ai: number;
  by_human: number;
  within: number;
  timed: number;
}

function keyOf(groupBy: GroupBy | undefined, timezone: string): RawBuilder<unknown> {
  switch (groupBy) {
    case 'agent':
      return sql`agent_id::text`;
    case 'channel':
      return sql`channel_id::text`;
    case 'stage':
      return sql`stage_id::text`;
    case 'day':
      return sql`to_char(happened_at at time zone ${timezone}, 'YYYY-MM-DD')`;
    default:
      return sql`null::text`;
  }
}

const EMPTY: Figures = { count: 0, meanSeconds: null, p50Seconds: null, p90Seconds: null };
const round = (value: number | null): number | null => (value === null ? null : Math.round(value * 1000) / 1000);

/** A group's figures from its rows (one per metric that has any). */
function figuresOf(rows: readonly Row[]): Totals {
  const of = (metric: Row['metric']): Figures => {
    const row = rows.find((r) => r.metric === metric);
    return row ? { count: row.count, meanSeconds: round(row.mean), p50Seconds: round(row.p?.[0] ?? null), p90Seconds: round(row.p?.[1] ?? null) } : EMPTY;
  };
  const first = rows.find((r) => r.metric === 'firstResponse');
  const timed = rows.reduce((sum, r) => sum + r.timed, 0);
  const within = rows.reduce((sum, r) => sum + r.within, 0);
  return {
    firstResponse: { ...of('firstResponse'), byAi: first?.by_ai ?? 0, byHuman: first?.by_human ?? 0 },
    nextResponse: of('nextResponse'),
    resolution: of('resolution'),
    slaAchievedPercent: timed === 0 ? null : Math.round((1000 * within) / timed) / 10,
  };
}

/** The report of the workspace over [from, to] (both inclusive), broken down by `groupBy` when given. */
export async function responseTimes(
  db: Db,
  workspaceId: string,
  window: { from: string; to: string },
  options: { groupBy?: GroupBy | undefined; businessHours: boolean },
): Promise<Report> {
  const settings = options.groupBy === 'day' ? await loadSettings(db, workspaceId) : undefined;
  const duration = options.businessHours ? sql`business_seconds` : sql`seconds`;
  const { rows } = await sql<Row>`
    select ${options.groupBy ? sql`grouping(key) = 1` : sql`true`} as total, ${options.groupBy ? sql`key` : sql`null::text`} as key, metric,
           count(*)::int as count, avg(d)::float8 as mean, percentile_cont(array[0.5, 0.9]) within group (order by d) as p,
           (count(*) filter (where by_ai))::int as by_ai, (count(*) filter (where not by_ai))::int as by_human,
           (count(*) filter (where within_sla))::int as within, count(within_sla)::int as timed
      from (select ${keyOf(options.groupBy, settings?.timezone ?? 'UTC')} as key, metric, ${duration} as d, by_ai, within_sla
              from sla_metrics
             where workspace_id = ${workspaceId} and happened_at between ${window.from}::timestamptz and ${window.to}::timestamptz) m
     group by ${options.groupBy ? sql`grouping sets ((key, metric), (metric))` : sql`metric`}`.execute(db);
  const groups = new Map<string | null, Row[]>();
  if (options.groupBy) {
    for (const row of rows.filter((r) => !r.total)) groups.set(row.key, [...(groups.get(row.key) ?? []), row]);
  }
  const keys = [...groups.keys()].sort((a, b) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : a > b ? 1 : 0));
  return {
    data: keys.map((key) => ({ key, ...figuresOf(groups.get(key)!) })),
    total: figuresOf(rows.filter((r) => r.total)),
  };
}
