// The durable queue as a test observes it: the jobs table, read directly. "No job left" is the
// signal that the workers finished what they were asked (a job's row goes when it ends: done,
// given up or handed over), so a test asserts what did not happen only after it.
import type { Db } from '../../src/db/database.js';
import { waitFor } from './processes.js';

/** The workspace's jobs still stored, on `queue` if given. */
export async function jobsLeft(db: Db, workspaceId: string, queue?: string): Promise<number> {
  let query = db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('workspace_id', '=', workspaceId);
  if (queue !== undefined) query = query.where('queue', '=', queue);
  const { n } = await query.executeTakeFirstOrThrow();
  return Number(n);
}

/** Waits until the workspace has no job left (on `queue`, if given): every job it had has ended. */
export async function waitForNoJobs(db: Db, workspaceId: string, queue?: string, timeoutMs = 10_000): Promise<void> {
  await waitFor(`no ${queue ?? ''} job left in workspace ${workspaceId}`, async () => (await jobsLeft(db, workspaceId, queue)) === 0, timeoutMs);
}
