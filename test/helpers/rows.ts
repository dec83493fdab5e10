// Counting a workspace's rows in its tables, for tests asserting what was stored (or not).
import { sql } from 'kysely';
import type { Db } from '../../src/db/database.js';

/** The tables whose rows tests count by workspace. */
export type CountedTable = 'agents' | 'contacts' | 'channels' | 'threads' | 'messages' | 'idempotency_keys';

/** How many rows of `table` the workspace has. */
export async function countRows(db: Db, table: CountedTable, workspaceId: string): Promise<number> {
  const { n } = await db
    .selectFrom(table)
    .select(sql<number>`count(*)::int`.as('n'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return n;
}
