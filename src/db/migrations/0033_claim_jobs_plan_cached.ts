// The queue's claim keeps its plan for the session. claim_jobs of migration 0008 is a SQL function
// with SET clauses, which PostgreSQL never inlines and plans anew at every call: under load, when
// workers claim many times a second, planning its statement cost more of PostgreSQL's CPU than
// running it. As PL/pgSQL, the same statement is prepared once per session and its plan cached.
//
// - Same signature, result, volatility and SET clauses (the reasons are 0008's; one more below),
//   and the same statement. RETURN QUERY in a volatile function runs with a snapshot of its own, taken when it
//   starts, as the SQL function's statement did: the claim still sees jobs committed after the
//   snapshot of the statement that calls it.
// - plan_cache_mode = force_generic_plan: the plan is made once, without the arguments' values, as
//   the SQL function's was made at each call (PostgreSQL plans a SQL function's statement with its
//   arguments as parameters): the same plan, due jobs read from jobs_due_idx in claim order, the
//   earlier jobs of a key looked up in jobs_ordering_idx, the picked ones by the primary key. Left
//   to choose, the plan cache would go on planning each call for the values: a plan without them
//   estimates LIMIT p_window at a tenth of the queue's due jobs, which looks far dearer than a
//   plan for a window of 10 or 256, though it reads the same rows.
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

/** The claim's statement, as 0008 wrote it ($$-quoted SQL text). */
const claim = `with candidates as materialized (
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
           from look left join claimed on true`;

const signature = `claim_jobs(p_queue text, p_worker text, p_limit int, p_lease_ms int,
                                  p_group_field text, p_allowance jsonb, p_otherwise int, p_window int)
       returns table (job jobs, left_behind boolean, next_run_at timestamptz)`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql
    .raw(
      `create or replace function ${signature}
       language plpgsql volatile
       set enable_bitmapscan = off
       set enable_seqscan = off
       set plan_cache_mode = force_generic_plan
       as $$
       begin
         return query
         ${claim};
       end
       $$`,
    )
    .execute(db);
}

// 0008's SQL function again, in 0008's words (its CREATE has no OR REPLACE, so this one goes first).
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function claim_jobs(text, text, int, int, text, jsonb, int, int)`.execute(db);
  await sql
    .raw(
      `create function ${signature}
       language sql volatile
       set enable_bitmapscan = off
       set enable_seqscan = off
       as $$
         ${claim}
       $$`,
    )
    .execute(db);
}
