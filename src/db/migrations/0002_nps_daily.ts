// The NPS answers per workspace and UTC day, so a long window sums whole days instead of counting
// every answer; backfilled from the answers already stored. Answers that instances still running
// older code write after it are not counted: roll it out with those stopped. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

/**
 * Fills an empty nps_daily from the answers in threads. Plain SQL text, so the bench's bulk seed
 * runs the same statement after loading threads (app code may import a migration, not the reverse).
 */
export const NPS_DAILY_BACKFILL = `
  insert into nps_daily (workspace_id, day, promotores, neutros, detratores)
  select workspace_id, (nps_created_at at time zone 'UTC')::date,
         count(*) filter (where nps_score >= 9),
         count(*) filter (where nps_score between 7 and 8),
         count(*) filter (where nps_score <= 6)
    from threads
   where nps_created_at is not null
   group by 1, 2`;

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table nps_daily (
    workspace_id uuid not null references workspaces (id) on delete cascade,
    day date not null,
    promotores int not null,
    neutros int not null,
    detratores int not null,
    primary key (workspace_id, day)
  )`,
  sql.raw(NPS_DAILY_BACKFILL),
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists nps_daily`.execute(db);
}
