// Automations' runs, and what the engine reads to run them: the enabled automations of a trigger,
// a thread locked for a run with its last message, a contact's context. A run's row is written at
// most once per (automation, trigger key): the unique index of migration 0022 is the guard, and
// insertRunQuery's conflict writes nothing.
import { sql, type RawBuilder } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import { listPage, listSource, type PageText } from './pagination.js';
import type { AutomationRow } from './schema.js';

export type AutomationRun = components['schemas']['AutomationRun'];
export type AutomationRunAction = components['schemas']['AutomationRunAction'];

/** How long runs are kept. */
export const RUN_RETENTION_DAYS = 30;

/** The workspace's enabled automations whose trigger is `trigger`, in position order. */
export async function enabledAutomations(db: Db, workspaceId: string, trigger: string): Promise<AutomationRow[]> {
  return db
    .selectFrom('automations')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('enabled', '=', true)
    .where(sql<boolean>`trigger->>'event' = ${trigger}`)
    .orderBy('position')
    .execute();
}

/**
 * Statement builder: the WITH query `run` that inserts `run` (ids and instant given), returning a
 * row only when the automation had no run for this trigger key: embed it in the statement that
 * records its event.
 */
export function insertRunQuery(workspaceId: string, run: AutomationRun, triggerKey: string): RawBuilder<unknown> {
  return sql`run as (
      insert into automation_runs (workspace_id, id, automation_id, trigger_key, event_id, thread_id, status, reason, actions, created_at)
      values (${workspaceId}::uuid, ${run.id}::uuid, ${run.automationId}::uuid, ${triggerKey}, ${run.eventId}::uuid, ${run.threadId}::uuid,
              ${run.status}, ${run.reason}, ${JSON.stringify(run.actions)}::jsonb, ${run.createdAt}::timestamptz)
      on conflict (workspace_id, automation_id, trigger_key) do nothing
      returning id
    )`;
}

const runList = listSource<AutomationRun>('automation_runs', {
  id: 'id',
  automationId: 'automation_id',
  eventId: 'event_id',
  threadId: 'thread_id',
  status: 'status',
  reason: 'reason',
  actions: 'actions',
  createdAt: { instant: 'created_at' },
});

/** A page of one automation's runs, newest first. */
export function listAutomationRuns(db: Db, workspaceId: string, automationId: string, page: number, limit: number): Promise<PageText<AutomationRun>> {
  return listPage(
    db,
    runList,
    [
      ['workspace_id = ?', workspaceId],
      ['automation_id = ?', automationId],
    ],
    { page, limit, newestFirst: true },
  );
}

/** A page of the runs on one thread, newest first. */
export function listThreadRuns(db: Db, workspaceId: string, threadId: string, page: number, limit: number): Promise<PageText<AutomationRun>> {
  return listPage(
    db,
    runList,
    [
      ['workspace_id = ?', workspaceId],
      ['thread_id = ?', threadId],
    ],
    { page, limit, newestFirst: true },
  );
}

/** Deletes runs older than the retention; how many went. */
export async function purgeOldRuns(db: Db, now: Date = new Date()): Promise<number> {
  const before = new Date(now.getTime() - RUN_RETENTION_DAYS * 86_400_000);
  const result = await db.deleteFrom('automation_runs').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** A thread as a run sees it: locked until the run's transaction ends, with its last message (the silence's start). */
export interface LockedThread {
  id: string;
  status: 'open' | 'closed';
  contact_id: string;
  channel_id: string;
  last_message_id: string | null;
  last_message_at: Date | null;
  last_message_direction: 'inbound' | 'outbound' | null;
}

/**
 * Locks the thread for the run's transaction (changes of one thread then wait for the run, and a
 * message that ends a silence cannot commit between the timer's check and its actions) and reads
 * its last message; undefined when there is no such thread.
 */
export async function lockThreadForRun(trx: Db, workspaceId: string, threadId: string): Promise<LockedThread | undefined> {
  const { rows } = await sql<LockedThread>`
    select t.id, t.status, t.contact_id, t.channel_id, m.id as last_message_id, m.created_at as last_message_at,
           m.direction as last_message_direction
      from threads t
      left join lateral (
        select id, created_at, direction from messages
         where workspace_id = t.workspace_id and thread_id = t.id
         order by created_at desc, id desc limit 1) m on true
     where t.workspace_id = ${workspaceId} and t.id = ${threadId}
       for update of t`.execute(trx);
  return rows[0];
}

/** A contact's labels and attributes, as a contact.created run evaluates them; undefined when gone. */
export async function readContactContext(db: Db, workspaceId: string, contactId: string): Promise<{ labels: unknown; attributes: unknown } | undefined> {
  return db
    .selectFrom('contacts')
    .select(['labels', 'attributes'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', contactId)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
}
