// NPS answers of a window broken down by UTC day, or by the thread's channel, agent or stage at the
// moment of the answer. As countNpsAnswers does, whole UTC days come from the daily rollups
// (nps_daily by day, nps_daily_groups by channel, agent and stage), kept exact by setNpsAnswer,
// and only the two partial edge days are counted from the answered threads' indexes.
import { sql, type RawBuilder } from 'kysely';
import type { operations } from '../../generated/api.js';
import type { Db } from './database.js';
import { NO_AGENT } from './schema.js';
import type { NpsCounts } from './threads.js';
import { instantToIso, wholeUtcDays } from '../time.js';

export type NpsGroupBy = NonNullable<NonNullable<operations['getNpsStats']['parameters']['query']>['groupBy']>;

export interface NpsGroupCounts extends NpsCounts {
  /** A channel, agent or stage id, or a UTC date YYYY-MM-DD; null for answers given without an agent. */
  key: string | null;
}

const tally = sql`count(*) filter (where nps_score >= 9)::int as promotores,
  count(*) filter (where nps_score between 7 and 8)::int as neutros,
  count(*) filter (where nps_score <= 6)::int as detratores`;

/** The group key of an answered thread's row, as text; constants of the code, one per grouping. */
const threadKey: Record<NpsGroupBy, RawBuilder<unknown>> = {
  day: sql`(nps_created_at at time zone 'UTC')::date::text`,
  channel: sql`channel_id::text`,
  agent: sql`coalesce(nps_agent_id, ${sql.lit(NO_AGENT)}::uuid)::text`,
  stage: sql`nps_stage_id::text`,
};

/**
 * The answers with from <= nps_created_at <= to (microseconds since the epoch) per group, sorted by
 * key (answers without an agent last), in one statement; groups without answers are left out.
 */
export async function countNpsGroups(db: Db, workspaceId: string, fromInstant: bigint, toInstant: bigint, groupBy: NpsGroupBy): Promise<NpsGroupCounts[]> {
  const [lower, upper] = [instantToIso(fromInstant), instantToIso(toInstant)];
  const key = threadKey[groupBy];
  const days = wholeUtcDays(fromInstant, toInstant);
  const edge = (from: string, to: string, toInclusive: boolean) => sql`
    select ${key} as key, ${tally}
      from threads
     where workspace_id = ${workspaceId}
       and nps_created_at >= ${from}::timestamptz
       and nps_created_at ${toInclusive ? sql`<=` : sql`<`} ${to}::timestamptz
     group by 1`;
  const whole = !days
    ? undefined
    : groupBy === 'day'
      ? sql`select day::text as key, promotores, neutros, detratores
              from nps_daily
             where workspace_id = ${workspaceId} and day >= ${days.first}::date and day < ${days.end}::date`
      : sql`select key::text as key, promotores, neutros, detratores
              from nps_daily_groups
             where workspace_id = ${workspaceId} and dimension = ${groupBy}
               and day >= ${days.first}::date and day < ${days.end}::date`;
  const parts = !days ? edge(lower, upper, true) : sql`${whole} union all ${edge(lower, days.firstStart, false)} union all ${edge(days.endStart, upper, true)}`;
  const result = await sql<NpsGroupCounts>`
    select nullif(key, ${NO_AGENT}) as key, sum(promotores)::int as promotores, sum(neutros)::int as neutros, sum(detratores)::int as detratores
      from (${parts}) parts
     group by key
     order by key = ${NO_AGENT}, key`.execute(db);
  return result.rows;
}
