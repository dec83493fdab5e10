// AI agents answer on threads: an outbound message records the agent that wrote it (messages.agent_id).
// No foreign key: like a history entry's actor, the id stays after the agent is deleted (it says who
// wrote the message, not who is assigned). Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column agent_id uuid`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column if exists agent_id`.execute(db);
}
