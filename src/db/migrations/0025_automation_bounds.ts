// The bounds of automations (issue 31). A run keeps its automation's id without a foreign key, so
// the runs of a deleted automation stay readable for their retention, and records the key of the
// event (or silence) that began its chain (`root_key`), which bounds the runs one root causes. A
// message remembers the automation that sent it (`automation_id`, kept after the automation is
// deleted): automations' messages are counted per thread and hour, and start no silence. An
// automation keeps its conditions with their text values folded when saved (`folded_conditions`),
// so runs fold nothing. Rows from before have none of these (null). Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`alter table automation_runs drop constraint automation_runs_workspace_id_automation_id_fkey`,
  sql`alter table automation_runs add column root_key text`,
  sql`create index automation_runs_root_idx on automation_runs (workspace_id, root_key) where root_key is not null`,
  sql`alter table messages add column automation_id uuid`,
  sql`alter table automations add column folded_conditions jsonb`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table automations drop column folded_conditions`.execute(db);
  await sql`alter table messages drop column automation_id`.execute(db);
  await sql`drop index automation_runs_root_idx`.execute(db);
  await sql`alter table automation_runs drop column root_key`.execute(db);
  await sql`delete from automation_runs r where not exists (select 1 from automations a where a.workspace_id = r.workspace_id and a.id = r.automation_id)`.execute(
    db,
  );
  await sql`alter table automation_runs add foreign key (workspace_id, automation_id) references automations (workspace_id, id) on delete cascade`.execute(db);
}
