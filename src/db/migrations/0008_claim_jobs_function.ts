// The queue's claim as a SQL function, so it runs in one round trip. The claim must read due jobs in
// jobs_due_idx's order: with no or stale statistics on jobs (a fresh table, a burst before
// autovacuum's ANALYZE, or autovacuum off) the planner otherwise expects a few dozen rows and
// chooses a bitmap scan of every due job plus a sort (15-30 ms a claim at a 10,000-job backlog
// against under 1 ms). A function's SET clauses turn bitmap and sequential scans off for its own
// statement only; before, the claim needed a transaction of four round trips (BEGIN, SET LOCAL,
// the claim, COMMIT) for that.
//
// claim_jobs(queue, worker, limit, lease ms, group field, allowance, otherwise, window) takes the
// first `window` due jobs of the queue in claim order, ranks them per group (payload ->> group
// field; one group when it is null), keeps each group's first `allowance ->> group` (else
// `otherwise`), locks up to `limit` of those (SKIP LOCKED), leases them to `worker` and counts the
// attempt. It returns one row per claimed job, or one row with a null job when none was claimed,
// each with `left_behind` (due jobs were kept back by an allowance, or lie past the window) and `next_run_at` (when the
// queue's next waiting job falls due). A job is due when its run_at has passed, nobody holds it
// (or its lease ran out), and no earlier job of its ordering key is still there nor held.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const due = (j: string) => `
         ${j}.queue = p_queue
     and ${j}.run_at <= now()
     and (${j}.locked_until is null or ${j}.locked_until < now())
     and (${j}.ordering_key is null or not exists (
           select 1
             from jobs e
            where e.queue = ${j}.queue
              and e.ordering_key = ${j}.ordering_key
              and e.id <> ${j}.id
              and ((e.created_at, e.id) < (${j}.created_at, ${j}.id) or e.locked_until >= now())))`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql
    .raw(
      `create function claim_jobs(p_queue text, p_worker text, p_limit int, p_lease_ms int,
                                  p_group_field text, p_allowance jsonb, p_otherwise int, p_window int)
       returns table (job jobs, left_behind boolean, next_run_at timestamptz)
       language sql volatile
       set enable_bitmapscan = off
       set enable_seqscan = off
       as $$
         with candidates as materialized (
           select w.workspace_id, w.id, w.run_at, w.created_at,
                  row_number() over (partition by w.payload ->> p_group_field order by w.run_at, w.created_at, w.id) as rank,
                  coalesce((p_allowance ->> (w.payload ->> p_group_field))::int, p_otherwise) as allowed
             from (select j.* from jobs j where ${due('j')}
                    order by j.run_at, j.created_at, j.id
                    limit p_window) w
         ), picked as (
           select j.workspace_id, j.id
             from candidates c
             join jobs j on j.workspace_id = c.workspace_id and j.id = c.id
            where c.rank <= c.allowed
              and ${due('j')}
            order by c.run_at, c.created_at, c.id
            limit p_limit
              for update of j skip locked
         ), claimed as (
           update jobs
              set locked_by = p_worker,
                  locked_until = now() + p_lease_ms * interval '1 millisecond',
                  attempts = jobs.attempts + 1
             from picked
            where jobs.workspace_id = picked.workspace_id
              and jobs.id = picked.id
           returning jobs
         ), look as (
           select exists (select 1 from candidates c where c.rank > c.allowed)
                  or (select count(*) from candidates) >= p_window as left_behind,
                  (select min(n.run_at) from jobs n where n.queue = p_queue and n.run_at > now()) as next_run_at
         )
         select claimed.jobs, look.left_behind, look.next_run_at
           from look left join claimed on true
       $$`,
    )
    .execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists claim_jobs(text, text, int, int, text, jsonb, int, int)`.execute(db);
}
