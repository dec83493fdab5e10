// The funnel of a window: per stage, in funnel order, the moves into and out of it (the stage
// entries of the threads' history), the median stay among those that ended in the window, and the
// open threads in it now. Each stage costs a few index-only range scans: entries and exits over
// the window's history (thread_history_stage_entries_idx, thread_history_stage_exits_idx, the
// latter holding each stay's length) and its open threads (threads_open_stage_idx).
import { sql } from 'kysely';
import type { Db } from './database.js';

export interface FunnelStageCounts {
  stageId: string;
  name: string;
  entered: number;
  exited: number;
  current: number;
  /** The median stay in milliseconds, halves rounded up; null when no stay ended in the window. */
  medianMs: number | null;
}

/** Bounds are ISO 8601 UTC instants (microseconds allowed), both inclusive. */
export async function funnelCounts(db: Db, workspaceId: string, from: string, to: string): Promise<FunnelStageCounts[]> {
  const result = await sql<Omit<FunnelStageCounts, 'medianMs'> & { medianMs: string | null }>`
    select s.id as "stageId", s.name,
           (select count(*)::int
              from thread_history h
             where h.workspace_id = s.workspace_id and h.field = 'stageId' and h.to_id = s.id
               and h.created_at >= ${from}::timestamptz and h.created_at <= ${to}::timestamptz) as entered,
           x.exited,
           (select count(*)::int
              from threads t
             where t.workspace_id = s.workspace_id and t.stage_id = s.id and t.status = 'open') as current,
           x.median_ms::bigint::text as "medianMs"
      from stages s
     cross join lateral (
           select count(*)::int as exited, floor(percentile_cont(0.5) within group (order by h.stay_ms) + 0.5) as median_ms
             from thread_history h
            where h.workspace_id = s.workspace_id and h.field = 'stageId' and h.from_id is not null and h.from_id = s.id
              and h.created_at >= ${from}::timestamptz and h.created_at <= ${to}::timestamptz) x
     where s.workspace_id = ${workspaceId}
     order by s.position`.execute(db);
  return result.rows.map((row) => ({ ...row, medianMs: row.medianMs === null ? null : Number(row.medianMs) }));
}
