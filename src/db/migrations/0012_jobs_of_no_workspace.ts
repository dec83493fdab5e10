// Jobs of the whole cluster, which belong to no workspace: the recurring schedules (the event and
// Idempotency-Key purges, and next the timers of automations) are one job each for all instances,
// with the nil UUID as workspace_id. So jobs no longer references workspaces: a workspace's jobs
// were never deleted by the service, and one whose records are gone finds nothing to do and ends.
// Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table jobs drop constraint jobs_workspace_id_fkey`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // The cluster's jobs, and any of a workspace deleted since: the reference would refuse them.
  await sql`delete from jobs j where not exists (select 1 from workspaces w where w.id = j.workspace_id)`.execute(db);
  await sql`alter table jobs add constraint jobs_workspace_id_fkey foreign key (workspace_id) references workspaces (id) on delete cascade`.execute(db);
}
