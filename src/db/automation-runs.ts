// Automations' runs, and what the engine reads to run them: the enabled automations of a trigger,
// a thread locked for a run with its last message, a contact's context. A run's row is written at
// most once per (automation, trigger key): the unique index of migration 0022 is the guard, and
// insertRunQuery's conflict writes nothing.
import { sql, type RawBuilder } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import { listPage, listSource, type PageText } from './pagination.js';
import { rowToStoredSettings, type Settings } from './settings.js';
import { MAX_DEFINITION_BYTES, threadContextQuery, type ThreadContextRow } from './automations.js';

type StoredSettingsRow = Parameters<typeof rowToStoredSettings>[0] & object;
import type { AutomationRow, MessageDirection, ThreadRow, ThreadStatus } from './schema.js';
import type { VersionedThread } from './threads.js';

export type AutomationRun = components['schemas']['AutomationRun'];
export type AutomationRunAction = components['schemas']['AutomationRunAction'];

/** How long runs are kept. */
export const RUN_RETENTION_DAYS = 30;

/** A run's values as insertRunQuery's statement takes them: its fields, its actions as JSON text, its keys. */
export type RunValues = { [F in Exclude<keyof AutomationRun, 'actions'>]: AutomationRun[F] } & { actions: string; triggerKey: string; rootKey: string };

/** `run` as insertRunQuery takes it; `keys.root` is the event or silence that began the run's chain. */
export const runValues = (run: AutomationRun, keys: { trigger: string; root: string }): RunValues => ({
  ...run,
  actions: JSON.stringify(run.actions),
  triggerKey: keys.trigger,
  rootKey: keys.root,
});

/**
 * Statement builder: the WITH query `run` that inserts the run of `values` (ids and instant given:
 * values, or placeholders of them), returning a row only when the automation had no run for this
 * trigger key: embed it in the statement that records its event.
 */
export function insertRunQuery(workspaceId: string, run: Record<keyof RunValues, unknown>): RawBuilder<unknown> {
  return sql`run as (
      insert into automation_runs (workspace_id, id, automation_id, trigger_key, root_key, event_id, thread_id, status, reason, actions, created_at)
      values (${workspaceId}::uuid, ${run.id}::uuid, ${run.automationId}::uuid, ${run.triggerKey}::text, ${run.rootKey}::text, ${run.eventId}::uuid, ${run.threadId}::uuid,
              ${run.status}::text, ${run.reason}::text, ${run.actions}::jsonb, ${run.createdAt}::timestamptz)
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

/**
 * How many runs the chain begun by `rootKey` has had (those the loop guard skipped aside), after
 * taking the root's lock until the transaction ends: two runs of one chain on two instances count
 * one after the other. Two statements, so the count sees what the lock waited for.
 */
export async function countRootRuns(trx: Db, workspaceId: string, rootKey: string): Promise<number> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`automation-root/${workspaceId}/${rootKey}`}, 25))`.execute(trx);
  const { rows } = await sql<{ count: string }>`
    select count(*) as count from automation_runs
     where workspace_id = ${workspaceId} and root_key = ${rootKey} and reason is distinct from 'loop_prevented'`.execute(trx);
  return Number(rows[0]!.count);
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
  status: ThreadStatus;
  contact_id: string;
  channel_id: string;
  last_message_id: string | null;
  last_message_at: Date | null;
  last_message_direction: MessageDirection | null;
  /** How many messages automations sent on the thread in the last hour. */
  automation_messages: number;
}

/** SQL: how many messages automations sent on the thread `threadId` (an SQL expression) in the last hour. */
const automationMessagesQuery = (workspaceId: string, threadId: RawBuilder<unknown>): RawBuilder<number> => sql<number>`(
    select count(*)::int from messages am
     where am.workspace_id = ${workspaceId}::uuid and am.thread_id = ${threadId} and am.automation_id is not null
       and am.created_at > now() - interval '1 hour')`;

/**
 * An automation as a run reads it: `updated_at` is its version (automations/prepared.ts), and
 * `folded` says its conditions are those folded when saved (rows from before have only theirs).
 */
export type RunnableAutomation = Pick<AutomationRow, 'id' | 'conditions' | 'actions' | 'updated_at'> & { folded: boolean };

/** A stored automation as a run reads it. */
export const runnableOf = (row: AutomationRow): RunnableAutomation => ({
  id: row.id,
  conditions: row.folded_conditions ?? row.conditions,
  folded: row.folded_conditions !== null,
  actions: row.actions,
  updated_at: row.updated_at,
});

/** Which automation, in which version (updated_at, as JSON text when read in a JSON aggregate). */
export interface AutomationVersion {
  id: string;
  updated_at: Date | string;
}

/**
 * SQL over the automation `a`: not one stored over the size bound before it existed (those run no
 * more until changed to fit). Checked when a version is loaded (automations/prepared.ts remembers
 * it), not in each run's list of versions: it turns three jsonb values into text. jsonb's text has
 * a space after each separator, at most half again the compact JSON the bound measures: everything
 * stored within the bound passes.
 */
const withinStoredBound = sql`octet_length(a.trigger::text) + octet_length(a.conditions::text) + octet_length(a.actions::text) <= ${2 * MAX_DEFINITION_BYTES}`;

/** An automation as loaded for a run: runnable, or over the size bound and without its definition. */
export type LoadedAutomation = (RunnableAutomation & { fits: true }) | (AutomationVersion & { fits: false });

/**
 * The automations of `ids` (the workspace's, still there) as a run reads them; one stored over the
 * size bound before it existed comes without its definition: never loaded, so a workspace of them
 * cannot exhaust the memory.
 */
export async function loadRunnableAutomations(db: Db, workspaceId: string, ids: readonly string[]): Promise<LoadedAutomation[]> {
  const { rows } = await sql<LoadedAutomation>`
    select a.id, a.updated_at, b.fits, case when b.fits then a.actions end as actions,
           case when b.fits then coalesce(a.folded_conditions, a.conditions) end as conditions, a.folded_conditions is not null as folded
      from automations a
     cross join lateral (select ${withinStoredBound} as fits) b
     where a.workspace_id = ${workspaceId} and a.id in (${sql.join(ids)})`.execute(db);
  return rows;
}

/**
 * The WITH query `locked`: the run's thread locked for its transaction (none when `threadId` is
 * null or the thread is gone), with the version the lock saw.
 */
function lockedThreadQuery(workspaceId: string, threadId: string | null, lock = true): RawBuilder<unknown> {
  return sql`locked as (
      select t.*, t.xmin::text as version
        from threads t
       where t.workspace_id = ${workspaceId} and t.id = ${threadId}::uuid
         ${lock ? sql`for update of t` : sql``}
    )`;
}

/** The locked thread as JSON, with its last message (automations' messages aside: they are no turn of the conversation). */
function lockedThreadJson(workspaceId: string): RawBuilder<unknown> {
  return sql`(select row_to_json(x) from (
              select l.id, l.status, l.contact_id, l.channel_id, m.id as last_message_id, m.created_at as last_message_at,
                     m.direction as last_message_direction, ${automationMessagesQuery(workspaceId, sql`l.id`)} as automation_messages
                from locked l
                left join lateral (
                  select id, created_at, direction from messages
                   where workspace_id = ${workspaceId} and thread_id = l.id and automation_id is null
                   order by created_at desc, id desc limit 1) m on true) x)`;
}

/**
 * Select-list items `settings` (the workspace's settings row) and `context` (what conditions see of
 * the thread). The statement's snapshot predates a wait for the lock: the context counts only when
 * it read the version locked.
 */
function settingsAndContext(workspaceId: string, threadId: string | null): RawBuilder<unknown> {
  return sql`(select row_to_json(s) from workspace_settings s where s.workspace_id = ${workspaceId}) as settings,
           (select row_to_json(c) from (${threadContextQuery(workspaceId, threadId)}) c
             where exists (select 1 from locked l, threads t
                            where t.workspace_id = ${workspaceId} and t.id = l.id and t.xmin::text = l.version)) as context`;
}

/** The locked thread as read, its last message's time a Date. */
function lockedThreadOf(thread: LockedThread | null): LockedThread | null {
  return thread && { ...thread, last_message_at: thread.last_message_at && new Date(thread.last_message_at) };
}

/**
 * Select-list items and FROM clause giving the locked thread's own row (its columns, and `version`
 * its xmin) beside the run's other reads: null columns when there is none. The row is the version
 * the lock holds, so a change of the thread later in the run's transaction need not read it again.
 */
const LOCKED_ROW = { columns: sql`l.*`, from: sql`from (select) as anchor left join locked l on true` };

/** What LOCKED_ROW selects: the thread's columns, null when there is no thread. */
type LockedRowColumns = { [K in keyof ThreadRow]: ThreadRow[K] | null } & { version: string | null };

/** The thread's row as the lock holds it, from the columns LOCKED_ROW selected. */
function lockedRowOf({ version, ...columns }: LockedRowColumns): VersionedThread | undefined {
  return version === null ? undefined : { row: columns as ThreadRow, version };
}

/** What an event's run starts from, read in one statement. */
export interface EventRunStart {
  /** The event's thread, locked for the run (undefined: no thread, or none any more): see startIdleRun. */
  thread: LockedThread | undefined;
  /** The same thread's row and version, as the lock holds them (what a change of it reads first). */
  locked: VersionedThread | undefined;
  /** The versions of the workspace's enabled automations of the trigger, in position order (over the size bound included: prepared.ts leaves those out). */
  automations: AutomationVersion[];
  /** The triggering event's object; undefined when it is gone (purged). */
  event: unknown;
  /** The clock an sla.warning or sla.breached event is about; null for other events. */
  metric: string | null;
  /** The keys of its settings the workspace set (services/settings.ts adds the defaults). */
  settings: Partial<Settings>;
  /**
   * What conditions see of the thread (readThreadContext), when the statement's snapshot saw the
   * version it locked; undefined without a thread, or when the lock waited for a change (then read it again).
   */
  context: ThreadContextRow | undefined;
  /** What the caller's `ahead` said (false without one). */
  ahead: boolean;
}

/** What startEventRun's caller may know or want besides the run. */
export interface EventRunOptions {
  /** Whether a run of the thread waits ahead of this one: a boolean SQL expression (automations/inline.ts); false without. */
  ahead?: RawBuilder<unknown>;
  /** The event as the caller's transaction just recorded it: its object and metric, not read back. */
  recorded?: { object: unknown; metric: string | null };
  /**
   * The caller's transaction wrote the thread already (a customer's message moved its times), so it
   * holds the row against every other change and run of it: the read locks it no second time (a
   * lock taken again is one more write of the row's header, and its WAL record).
   */
  held?: boolean;
}

/**
 * In ONE statement (a run's round trips are its cost): the thread locked for the run's transaction
 * with its last message (as startIdleRun), the enabled automations of `trigger`, the event's
 * object and the workspace's settings row; and what `options` asks.
 */
export async function startEventRun(
  trx: Db,
  workspaceId: string,
  run: { threadId: string | null; trigger: string; eventId: string },
  { ahead = sql`false`, recorded, held = false }: EventRunOptions = {},
): Promise<EventRunStart> {
  const { rows } = await sql<
    LockedRowColumns & {
      thread: LockedThread | null;
      automations: AutomationVersion[];
      event: { data: unknown; metric: string | null } | null;
      settings: StoredSettingsRow | null;
      context: ThreadContextRow | null;
      ahead: boolean;
    }
  >`
    with ${lockedThreadQuery(workspaceId, run.threadId, !held)}
    select ${LOCKED_ROW.columns}, ${lockedThreadJson(workspaceId)} as thread,
           coalesce((select json_agg(json_build_object('id', a.id, 'updated_at', a.updated_at) order by a.position)
                       from automations a
                      where a.workspace_id = ${workspaceId} and a.enabled and a.trigger->>'event' = ${run.trigger}), '[]'::json) as automations,
           ${recorded ? sql`null::json` : sql`(select json_build_object('data', e.data, 'metric', e.metric) from events e where e.workspace_id = ${workspaceId} and e.id = ${run.eventId}::uuid)`} as event,
           ${settingsAndContext(workspaceId, run.threadId)}, ${ahead} as ahead
      ${LOCKED_ROW.from}`.execute(trx);
  const { thread: json, automations, event, settings, context, ahead: waits, ...columns } = rows[0]!;
  const thread = lockedThreadOf(json);
  return {
    thread: thread ?? undefined,
    locked: thread ? lockedRowOf(columns) : undefined,
    automations,
    event: recorded ? recorded.object : (event?.data ?? undefined),
    metric: recorded ? recorded.metric : (event?.metric ?? null),
    settings: rowToStoredSettings(settings ?? undefined),
    context: context ?? undefined,
    ahead: waits,
  };
}

/** An automation as a timer's run first reads it: its version and trigger, not its definition (automations/prepared.ts caches that by version). */
export interface AutomationHead {
  id: string;
  enabled: boolean;
  trigger: AutomationRow['trigger'];
  updated_at: Date | string;
}

/** What a thread.idle timer's run starts from, read in one statement. */
export interface IdleRunStart {
  /** The timer's thread, locked for the run (undefined: there is no such thread any more). */
  thread: LockedThread | undefined;
  /** The same thread's row and version, as the lock holds them (what a change of it reads first). */
  locked: VersionedThread | undefined;
  /** The timer's automation; undefined when it was deleted. */
  automation: AutomationHead | undefined;
  /** The keys of its settings the workspace set (services/settings.ts adds the defaults). */
  settings: Partial<Settings>;
  /** What conditions see of the thread, when the statement's snapshot saw the version it locked (as EventRunStart's). */
  context: ThreadContextRow | undefined;
}

/**
 * In ONE statement, what a thread.idle timer's run needs to decide whether its silence still holds
 * and to run: the thread locked for the run's transaction (changes of one thread then wait for the
 * run, and a message that ends a silence cannot commit between the timer's check and its actions)
 * with its last message (automations' messages aside: they are no turn of the conversation), the
 * automation's version and trigger, the workspace's settings row and the thread's context.
 */
export async function startIdleRun(trx: Db, workspaceId: string, run: { threadId: string; automationId: string }): Promise<IdleRunStart> {
  const { rows } = await sql<
    LockedRowColumns & {
      thread: LockedThread | null;
      automation: AutomationHead | null;
      settings: StoredSettingsRow | null;
      context: ThreadContextRow | null;
    }
  >`
    with ${lockedThreadQuery(workspaceId, run.threadId)}
    select ${LOCKED_ROW.columns}, ${lockedThreadJson(workspaceId)} as thread,
           (select json_build_object('id', a.id, 'enabled', a.enabled, 'trigger', a.trigger, 'updated_at', a.updated_at)
              from automations a where a.workspace_id = ${workspaceId} and a.id = ${run.automationId}::uuid) as automation,
           ${settingsAndContext(workspaceId, run.threadId)}
      ${LOCKED_ROW.from}`.execute(trx);
  const { thread: json, automation, settings, context, ...columns } = rows[0]!;
  const row = { automation, settings, context };
  const thread = lockedThreadOf(json);
  return {
    thread: thread ?? undefined,
    locked: thread ? lockedRowOf(columns) : undefined,
    automation: row.automation ?? undefined,
    settings: rowToStoredSettings(row.settings ?? undefined),
    context: row.context ?? undefined,
  };
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
