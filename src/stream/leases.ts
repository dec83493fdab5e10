// Leases on the workspaces an instance streams (table stream_listeners, migration 0018): the
// statement recording an event sends `NOTIFY events_added` (the log's `stream` consumer, announce.ts)
// only for an event of a workspace some instance holds an unexpired lease on, so while nobody streams,
// events cost no notification (each one wakes every listening backend of the database). A lease is
// taken when a workspace gets its first stream on this instance and renewed every third of its length
// with all of them; a workspace left without streams is let go at the next renewal, and an instance
// that dies stops costing when its leases expire. Taking a lease cannot make a stream miss an event
// (streams read the log); it only decides whether writers wake the instance: the events of
// transactions that had written before it was taken are looked for until every such transaction has
// ended. One narrow case is left to the next read (another wake-up, or the read every
// fallbackPollMs): a recording statement that started before the lease committed and is its
// transaction's first write (its transaction id is taken after the lease's snapshot) decided under
// its own older snapshot that nobody streams.
import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';

export interface Leases {
  /** Takes the lease on the workspace's notifications unless this instance holds it. */
  take(workspaceId: string): void;
  /** Renews the leases of `current()`'s workspaces, lets the others go, drops every expired one. */
  renew(): void;
  /** Lets every lease of this instance go. */
  release(): Promise<void>;
}

/**
 * `current`: the workspaces streamed here now. `taken(xmax)`: a lease was taken; transactions below
 * `xmax` may have written events without a notification.
 */
export function createLeases(db: Db, logger: Logger, leaseMs: number, current: () => string[], taken: (xmax: bigint) => void): Leases {
  const instanceId = randomUUID();
  const held = new Set<string>();
  let queue: Promise<void> = Promise.resolve();
  let renewing = false;
  let closed = false;
  let failing = false;

  /** Runs `work` after the lease work before it: a renewal never undoes a lease taken meanwhile. */
  const serially = (work: () => Promise<void>): Promise<void> =>
    (queue = queue.then(work).then(
      () => {
        if (failing) logger.info('event stream leases are back');
        failing = false;
      },
      (err: Error) => {
        // Meanwhile streams still get every event: the log is read every second.
        if (!failing) logger.warn({ err: err.message }, 'event stream cannot renew its leases; retrying');
        failing = true;
      },
    ));

  const upsert = (workspaceIds: string[]) => sql`
    insert into stream_listeners (workspace_id, instance_id, expires_at)
    select w, ${instanceId}::uuid, now() + ${leaseMs} * interval '1 millisecond' from unnest(${workspaceIds}::uuid[]) w
    on conflict (workspace_id, instance_id) do update set expires_at = excluded.expires_at`;

  return {
    take(workspaceId) {
      if (closed || held.has(workspaceId)) return;
      held.add(workspaceId);
      void serially(async () => {
        try {
          await upsert([workspaceId]).execute(db);
        } catch (err) {
          held.delete(workspaceId);
          throw err;
        }
        // A snapshot after the lease's commit: a transaction that had written before it is below its xmax.
        const { rows } = await sql<{ xmax: string }>`select pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(db);
        taken(BigInt(rows[0]!.xmax));
      });
    },
    renew() {
      if (closed || renewing) return;
      renewing = true;
      void serially(async () => {
        try {
          const workspaceIds = current();
          if (workspaceIds.length === 0 && held.size === 0) return;
          await sql`
            with gone as (
              delete from stream_listeners
               where not (instance_id = ${instanceId}::uuid and workspace_id = any (${workspaceIds}::uuid[]))
                 and (instance_id = ${instanceId}::uuid or expires_at < now())
            ), renewed as (${upsert(workspaceIds)})
            select 1`.execute(db);
          const now = new Set(current());
          for (const id of held) if (!now.has(id) && !workspaceIds.includes(id)) held.delete(id);
          for (const id of workspaceIds) held.add(id);
        } finally {
          renewing = false;
        }
      });
    },
    async release() {
      closed = true;
      await serially(async () => {
        held.clear();
        await sql`delete from stream_listeners where instance_id = ${instanceId}::uuid`.execute(db);
      });
    },
  };
}
