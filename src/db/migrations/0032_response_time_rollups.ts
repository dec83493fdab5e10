// The response-time report's rollups (issue 37): GET /reports/response-times over a year of a busy
// workspace (1,000,000 messages, ~600,000 metric rows) in well under 300 ms, without replaying the
// metric rows of the days it covers. Nothing on the write path changes: a message or a closing still
// writes its one sla_metrics row, and the rollups are built from those rows, day by day, once a day
// has ended (src/sla/rollups.ts builds the days that ended since the last report, at the report;
// this migration builds every ended day of every workspace).
//
// - Days are the workspace's calendar days in its time zone, numbered from 1970-01-01
//   (sla_day(instant, tz); sla_day_start(day, tz) is the instant a day starts). A time zone change
//   makes the report rebuild them (sla_report_state.tz says which zone they were built in).
// - sla_report_blocks: one row per aligned block of 2^level days (level 0..8, a block of level L
//   starts on a day divisible by 2^L), per dimension (`total`, `agent`, `channel`, `stage`; `key`
//   the id, '' for none) and metric: count, AI / human first responses, within-SLA and timed counts,
//   sums of the wall-clock and the business-hours durations, and each duration's histogram as
//   parallel arrays of buckets and counts (sla_bucket: 0.02 s wide below 1 s, then 2 % wide: a
//   percentile read from it is within 2 % (or 0.02 s) of percentile_cont's). Any whole days of a
//   window of at most 366 days are at most 18 blocks. Level-0 rows of the `total` dimension also
//   keep that day's exact p50 and p90 (percentile_cont), which groupBy=day answers.
// - sla_report_state: per workspace, the zone the blocks were built in and the first day not built.
// - sla_report_build(workspace, tz, from, to) builds the days [from, to) and the blocks of higher
//   levels that end in (from, to]; the caller holds the workspace's build lock.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const statements = [
  sql`create function sla_day(p_at timestamptz, p_tz text) returns int
        language sql stable strict parallel safe
        as $$ select ((p_at at time zone p_tz)::date - date '1970-01-01') $$`,
  sql`create function sla_day_start(p_day int, p_tz text) returns timestamptz
        language sql stable strict parallel safe
        as $$ select ((date '1970-01-01' + p_day)::timestamp at time zone p_tz) $$`,
  sql`create function sla_bucket(p_seconds double precision) returns int
        language sql immutable strict parallel safe
        as $$ select case when p_seconds < 1 then greatest(0, floor(p_seconds * 50))::int
                          else 50 + floor(ln(p_seconds) / ln(1.02))::int end $$`,
  sql`create table sla_report_state (
    workspace_id uuid primary key references workspaces (id) on delete cascade,
    tz text not null,
    built_until int not null
  )`,
  sql`create table sla_report_blocks (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    level smallint not null check (level between 0 and 8),
    start int not null,
    dim text not null check (dim in ('total', 'agent', 'channel', 'stage')),
    key text not null,
    metric text not null check (metric in ('firstResponse', 'nextResponse', 'resolution')),
    n int not null,
    n_ai int not null,
    n_human int not null,
    within int not null,
    timed int not null,
    sum_s double precision not null,
    sum_b double precision not null,
    hs_b int[] not null,
    hs_n int[] not null,
    hb_b int[] not null,
    hb_n int[] not null,
    p_s double precision[],
    p_b double precision[],
    primary key (workspace_id, level, start, dim, key, metric)
  )`,
  sql`create function sla_report_build(p_ws uuid, p_tz text, p_from int, p_to int) returns void
        language plpgsql
        -- The day's joins are of grouped rows that the planner cannot count: hash them.
        set enable_nestloop = off
        as $fn$
      declare
        lvl int;
        size int;
        lo int;
        hi int;
      begin
        if p_to <= p_from then
          return;
        end if;
        -- One pass per figure over the day's rows, each grouped four ways (grouping sets): the
        -- total, and by agent, channel and stage (the key '' for none).
        with m as (
          select sla_day(happened_at, p_tz) as day, metric, agent_id, channel_id, stage_id, seconds, business_seconds, by_ai, within_sla,
                 sla_bucket(seconds) as bs, sla_bucket(business_seconds) as bb
            from sla_metrics
           where workspace_id = p_ws and happened_at >= sla_day_start(p_from, p_tz) and happened_at < sla_day_start(p_to, p_tz)
        ), s as (
          select day, metric,
                 case when grouping(agent_id) = 0 then 'agent' when grouping(channel_id) = 0 then 'channel'
                      when grouping(stage_id) = 0 then 'stage' else 'total' end as dim,
                 coalesce(agent_id::text, channel_id::text, stage_id::text, '') as key,
                 count(*)::int as n, (count(*) filter (where by_ai))::int as n_ai,
                 (count(*) filter (where not by_ai))::int as n_human, (count(*) filter (where within_sla))::int as within,
                 count(within_sla)::int as timed, sum(seconds) as sum_s, sum(business_seconds) as sum_b,
                 case when grouping(agent_id, channel_id, stage_id) = 7 then percentile_cont(array[0.5, 0.9]) within group (order by seconds) end as p_s,
                 case when grouping(agent_id, channel_id, stage_id) = 7 then percentile_cont(array[0.5, 0.9]) within group (order by business_seconds) end as p_b
            from m
           group by grouping sets ((day, metric), (day, metric, agent_id), (day, metric, channel_id), (day, metric, stage_id))
        ), hs as (
          select day, metric, dim, key, array_agg(b order by b) as hs_b, array_agg(c order by b) as hs_n
            from (select day, metric,
                         case when grouping(agent_id) = 0 then 'agent' when grouping(channel_id) = 0 then 'channel'
                              when grouping(stage_id) = 0 then 'stage' else 'total' end as dim,
                         coalesce(agent_id::text, channel_id::text, stage_id::text, '') as key, bs as b, count(*)::int as c
                    from m
                   group by grouping sets ((day, metric, bs), (day, metric, agent_id, bs), (day, metric, channel_id, bs), (day, metric, stage_id, bs))) x
           group by day, metric, dim, key
        ), hb as (
          select day, metric, dim, key, array_agg(b order by b) as hb_b, array_agg(c order by b) as hb_n
            from (select day, metric,
                         case when grouping(agent_id) = 0 then 'agent' when grouping(channel_id) = 0 then 'channel'
                              when grouping(stage_id) = 0 then 'stage' else 'total' end as dim,
                         coalesce(agent_id::text, channel_id::text, stage_id::text, '') as key, bb as b, count(*)::int as c
                    from m
                   group by grouping sets ((day, metric, bb), (day, metric, agent_id, bb), (day, metric, channel_id, bb), (day, metric, stage_id, bb))) x
           group by day, metric, dim, key
        )
        insert into sla_report_blocks (workspace_id, level, start, dim, key, metric, n, n_ai, n_human, within, timed, sum_s, sum_b,
                                       hs_b, hs_n, hb_b, hb_n, p_s, p_b)
        select p_ws, 0, s.day, s.dim, s.key, s.metric, s.n, s.n_ai, s.n_human, s.within, s.timed, s.sum_s, s.sum_b,
               hs.hs_b, hs.hs_n, hb.hb_b, hb.hb_n, s.p_s, s.p_b
          from s
          join hs using (day, dim, key, metric)
          join hb using (day, dim, key, metric);

        for lvl in 1..8 loop
          size := 1 << lvl;
          -- Blocks of this level that end in (p_from, p_to]: their children, one level down, are built.
          lo := (p_from / size) * size;
          hi := (p_to / size) * size;
          continue when hi <= lo;
          -- One pass over the children: their figures summed, their histograms concatenated (in
          -- the same order), then each block's buckets summed on its own row.
          with g as (
            select (start / size) * size as block, dim, key, metric, sum(n)::int as n, sum(n_ai)::int as n_ai, sum(n_human)::int as n_human,
                   sum(within)::int as within, sum(timed)::int as timed, sum(sum_s) as sum_s, sum(sum_b) as sum_b,
                   string_agg(array_to_string(hs_b, ','), ',' order by start) as sb, string_agg(array_to_string(hs_n, ','), ',' order by start) as sn,
                   string_agg(array_to_string(hb_b, ','), ',' order by start) as bb, string_agg(array_to_string(hb_n, ','), ',' order by start) as bn
              from sla_report_blocks
             where workspace_id = p_ws and sla_report_blocks.level = lvl - 1 and start >= lo and start < hi
             group by 1, dim, key, metric
          )
          insert into sla_report_blocks (workspace_id, level, start, dim, key, metric, n, n_ai, n_human, within, timed, sum_s, sum_b,
                                         hs_b, hs_n, hb_b, hb_n)
          select p_ws, lvl, g.block, g.dim, g.key, g.metric, g.n, g.n_ai, g.n_human, g.within, g.timed, g.sum_s, g.sum_b, hs.b, hs.k, hb.b, hb.k
            from g
           cross join lateral (select array_agg(x.b order by x.b) as b, array_agg(x.k order by x.b) as k
                                 from (select u.b, sum(u.k)::int as k
                                         from unnest(string_to_array(g.sb, ',')::int[], string_to_array(g.sn, ',')::int[]) u (b, k)
                                        group by u.b) x) hs
           cross join lateral (select array_agg(x.b order by x.b) as b, array_agg(x.k order by x.b) as k
                                 from (select u.b, sum(u.k)::int as k
                                         from unnest(string_to_array(g.bb, ',')::int[], string_to_array(g.bn, ',')::int[]) u (b, k)
                                        group by u.b) x) hb;
        end loop;
      end
      $fn$`,
  // The backfill: every day that ended (10 minutes ago, as the report's build) of every workspace
  // with metric rows, in the workspace's time zone (the default when it never set one).
  sql`insert into sla_report_state (workspace_id, tz, built_until)
      select w.id, x.tz, sla_day(m.first_at, x.tz)
        from workspaces w
        cross join lateral (select coalesce((select s.timezone from workspace_settings s where s.workspace_id = w.id), 'America/Sao_Paulo') as tz) x
        join lateral (select min(happened_at) as first_at from sla_metrics where workspace_id = w.id) m on m.first_at is not null`,
  sql`select sla_report_build(workspace_id, tz, built_until, sla_day(now() - interval '10 minutes', tz)) from sla_report_state`,
  sql`update sla_report_state set built_until = greatest(built_until, sla_day(now() - interval '10 minutes', tz))`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists sla_report_build(uuid, text, int, int)`.execute(db);
  await sql`drop table if exists sla_report_blocks`.execute(db);
  await sql`drop table if exists sla_report_state`.execute(db);
  await sql`drop function if exists sla_bucket(double precision)`.execute(db);
  await sql`drop function if exists sla_day_start(int, text)`.execute(db);
  await sql`drop function if exists sla_day(timestamptz, text)`.execute(db);
}
