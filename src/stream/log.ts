// The event log as the live stream reads it: in (commit_xid, id) order, and only below the horizon,
// the oldest transaction of this database still running (migration 0014 says why that order has no gap).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { EventRow } from '../db/schema.js';

export interface LoggedEvent extends Pick<
  EventRow,
  'id' | 'type' | 'data' | 'created_at' | 'workspace_id' | 'actor_type' | 'actor_id' | 'source' | 'metric' | 'merged_ids'
> {
  /** The writing transaction (xid8). */
  xid: bigint;
}

/** Where a stream resumes: after this event of the order. */
export interface Position {
  xid: bigint;
  id: string;
}

interface Row extends Omit<LoggedEvent, 'xid'> {
  xid: string;
}

const toEvent = (row: Row): LoggedEvent => ({ ...row, xid: BigInt(row.xid) });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The horizon: every transaction below it that could have written events has ended, so its events
 * are visible now. The oldest transaction still running in the statement's snapshot, leaving out
 * those that pg_stat_activity shows in another database of the server (a backend writes only its
 * own database's tables): a long transaction elsewhere on a shared server holds no stream back. One
 * it cannot place (a prepared transaction, stats hidden from this role) counts as this database's.
 */
const HORIZON = sql<string>`(
  select coalesce(
           (select min(x) from pg_snapshot_xip(s.snap) x
             where not exists (
               select 1 from pg_stat_activity a
                where a.backend_xid = x::xid and a.datid <> (select oid from pg_database where datname = current_database()))),
           pg_snapshot_xmax(s.snap))::text
    from (select pg_current_snapshot() as snap) s)`;

export async function currentHorizon(db: Db): Promise<bigint> {
  const { rows } = await sql<{ horizon: string }>`select ${HORIZON} as horizon`.execute(db);
  return BigInt(rows[0]!.horizon);
}

/**
 * The events of `workspaceIds` written from `from` up to the current horizon (returned as `upTo`),
 * in the stream's order: one statement, so the horizon and the rows are of one snapshot.
 */
export async function committedSince(db: Db, workspaceIds: string[], from: bigint): Promise<{ upTo: bigint; events: LoggedEvent[] }> {
  const { rows } = await sql<{ up_to: string } & { [K in keyof Row]: Row[K] | null }>`
    with h as materialized (select ${HORIZON}::xid8 as up_to)
    select h.up_to::text as up_to, e.id, e.type, e.data, e.created_at, e.workspace_id, e.actor_type, e.actor_id, e.source, e.metric, e.merged_ids, e.commit_xid::text as xid
      from h left join events e
        on e.workspace_id = any (${workspaceIds}::uuid[]) and e.commit_xid >= ${from.toString()}::xid8 and e.commit_xid < h.up_to
     order by e.commit_xid, e.id`.execute(db);
  const upTo = BigInt(rows[0]!.up_to);
  return { upTo, events: rows.filter((row) => row.id !== null).map((row) => toEvent(row as Row)) };
}

/** Where event `id` of the workspace sits in the order; undefined when it is not there (unknown, another workspace's, purged). */
export async function positionOf(db: Db, workspaceId: string, id: string): Promise<Position | undefined> {
  if (!UUID.test(id)) return undefined;
  const row = await db
    .selectFrom('events')
    .select(sql<string>`coalesce(commit_xid, '0'::xid8)::text`.as('xid'))
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id.toLowerCase())
    .executeTakeFirst();
  return row && { xid: BigInt(row.xid), id: id.toLowerCase() };
}

/** Up to `limit` events of the workspace after `after` and below `before` (a horizon), in order. */
export async function eventsAfter(
  db: Db,
  workspaceId: string,
  after: Position,
  before: bigint,
  types: readonly string[] | undefined,
  limit: number,
): Promise<LoggedEvent[]> {
  const { rows } = await sql<Row>`
    select e.id, e.type, e.data, e.created_at, e.workspace_id, e.actor_type, e.actor_id, e.source, e.metric, e.merged_ids, e.commit_xid::text as xid
      from events e
     where e.workspace_id = ${workspaceId}::uuid
       and (e.commit_xid, e.id) > (${after.xid.toString()}::xid8, ${after.id}::uuid)
       and e.commit_xid < ${before.toString()}::xid8
       ${types ? sql`and e.type = any (${[...types]}::text[])` : sql``}
     order by e.commit_xid, e.id
     limit ${limit}`.execute(db);
  return rows.map(toEvent);
}

/** `a` comes after `b` in the stream's order. */
export function isAfter(a: Position, b: Position): boolean {
  return a.xid > b.xid || (a.xid === b.xid && a.id > b.id);
}
