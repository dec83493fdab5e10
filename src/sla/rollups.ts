// The response-time report's rollups (migration 0032 says what they hold): blocks of 2^level days
// (level 0..8) per dimension and metric, with counts, sums and duration histograms, built from the
// metric rows once a day of the workspace's time zone has ended. Nothing here runs on the write
// path: the report builds the days that ended since it last ran (ensureBuilt), and a window's whole
// days are then at most 18 blocks (blocksOf) whatever its length.
import { sql } from 'kysely';
import { transact, type Db } from '../db/database.js';

/** A day has ended for the rollups this long after its midnight: a metric row is written within its transaction, long before. */
export const ENDED_AFTER = '10 minutes';
/** The highest level: blocks of 256 days (a window of 366 days is at most 18 blocks). */
export const MAX_LEVEL = 8;

/**
 * Builds the workspace's days that have ended and are not yet built, in its time zone `tz` (all of
 * them again when they were built in another zone). Answers the first day not built (days numbered
 * from 1970-01-01 in `tz`), or undefined when another report is building them for another zone
 * right now (then the caller reads the metric rows). A concurrent report does not wait: it reads
 * what is built.
 */
export async function ensureBuilt(db: Db, workspaceId: string, tz: string): Promise<number | undefined> {
  return transact(db, async (trx) => {
    const { rows } = await sql<{ locked: boolean; tz: string | null; built_until: number | null; ended: number }>`
      select pg_try_advisory_xact_lock(hashtextextended(${`sla-report/${workspaceId}`}, 32)) as locked,
             s.tz, s.built_until, sla_day(now() - ${ENDED_AFTER}::interval, ${tz}) as ended
        from (select 1) one left join sla_report_state s on s.workspace_id = ${workspaceId}`.execute(trx);
    const row = rows[0]!;
    const built = row.tz === tz ? row.built_until : null;
    if (!row.locked) return built ?? undefined;
    let from = built;
    if (from === null) {
      await sql`delete from sla_report_blocks where workspace_id = ${workspaceId}`.execute(trx);
      const first = await sql<{ day: number | null }>`
        select sla_day(min(happened_at), ${tz}) as day from sla_metrics where workspace_id = ${workspaceId}`.execute(trx);
      from = Math.min(first.rows[0]?.day ?? row.ended, row.ended);
    }
    if (from < row.ended) await sql`select sla_report_build(${workspaceId}, ${tz}, ${from}::int, ${row.ended}::int)`.execute(trx);
    const until = Math.max(from, row.ended);
    if (until !== row.built_until || row.tz !== tz) {
      await sql`
        insert into sla_report_state (workspace_id, tz, built_until) values (${workspaceId}, ${tz}, ${until})
        on conflict (workspace_id) do update set tz = excluded.tz, built_until = excluded.built_until`.execute(trx);
    }
    return until;
  });
}

/** The aligned blocks that make up the days [from, to): each of 2^level days, starting on a multiple of it. */
export function blocksOf(from: number, to: number): Array<{ level: number; start: number }> {
  const blocks: Array<{ level: number; start: number }> = [];
  let day = from;
  while (day < to) {
    let level = MAX_LEVEL;
    while (level > 0 && (day % (1 << level) !== 0 || day + (1 << level) > to)) level--;
    blocks.push({ level, start: day });
    day += 1 << level;
  }
  return blocks;
}

/** The histogram's bucket of a duration (as the SQL function sla_bucket): 0.02 s wide below 1 s, then 2 % wide. */
export function bucketOf(seconds: number): number {
  return seconds < 1 ? Math.max(0, Math.floor(seconds * 50)) : 50 + Math.floor(Math.log(seconds) / Math.log(1.02));
}

/** The durations a bucket holds, [low, high). */
export function bucketBounds(bucket: number): [number, number] {
  return bucket < 50 ? [bucket / 50, (bucket + 1) / 50] : [1.02 ** (bucket - 50), 1.02 ** (bucket - 49)];
}
