// A workspace's automations: positions 1..n without gaps, in the order they run. Every change of
// positions runs in a transaction that first takes the workspace's automations lock
// (lockAutomations), so two changes never compute positions from the same state; a deferred unique
// constraint on (workspace_id, position) checks the result at commit.
import { CompiledQuery, sql, type RawBuilder, type Transaction } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import { readWithNext, type ReadWithNext } from './pg-driver.js';
import type { AutomationRow, Database, ThreadStatus } from './schema.js';
import { listPage, listSource, type PageText } from './pagination.js';
import { NAME_MAX, normalizedName } from '../text.js';

export type Automation = components['schemas']['Automation'];
/** What is stored of an automation's rule: its trigger, conditions and actions, and the conditions folded (foldConditions; without them, runs fold). */
type Definition = Pick<Automation, 'trigger' | 'conditions' | 'actions'> & { foldedConditions?: Automation['conditions'] };

/** The most an automation's trigger, conditions and actions may take together, as UTF-8 JSON (automations/validate.ts). */
export const MAX_DEFINITION_BYTES = 32 * 1024;

export function automationRowToAutomation(row: AutomationRow): Automation {
  return {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    position: row.position,
    trigger: row.trigger,
    conditions: row.conditions,
    actions: row.actions,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const automationList = listSource<Automation>(
  'automations',
  {
    id: 'id',
    name: 'name',
    enabled: 'enabled',
    position: 'position',
    trigger: 'trigger',
    conditions: 'conditions',
    actions: 'actions',
    createdAt: { instant: 'created_at' },
    updatedAt: { instant: 'updated_at' },
  },
  { order: ['position'] },
);

export async function listAutomations(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<Automation>> {
  return listPage(db, automationList, [['workspace_id = ?', workspaceId]], { page, limit });
}

/**
 * Takes the workspace's automations lock until the transaction ends (a transaction-scoped advisory
 * lock of its own, so it waits for no other kind of change) and answers how many it has.
 */
export async function lockAutomations(trx: Db, workspaceId: string): Promise<number> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`automations/${workspaceId}`}, 20))`.execute(trx);
  const row = await trx
    .selectFrom('automations')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

const HAS_ENABLED = `select exists (select 1 from automations where workspace_id = $1 and enabled and trigger->>'event' = any ($2::text[])) as enabled`;

/**
 * Whether the workspace has an enabled automation of one of `triggers`, read with the transaction's
 * next statement (pg-driver.ts readWithNext): no round trip of its own.
 */
export function enabledAutomationsWithNext(
  trx: Transaction<Database>,
  workspaceId: string,
  triggers: readonly string[],
): Promise<ReadWithNext<{ enabled: boolean }>> {
  return readWithNext<{ enabled: boolean }>(trx, CompiledQuery.raw(HAS_ENABLED, [workspaceId, triggers]));
}

export async function findAutomation(db: Db, workspaceId: string, id: string): Promise<AutomationRow | undefined> {
  return db.selectFrom('automations').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
}

/** Inserts an automation at `position` (1..count+1, checked by the caller), moving the later ones down. */
export async function insertAutomation(
  trx: Db,
  workspaceId: string,
  automation: Definition & { name: string; enabled: boolean; position: number },
  now: Date,
): Promise<Automation> {
  await trx
    .updateTable('automations')
    .set((eb) => ({ position: eb('position', '+', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>=', automation.position)
    .execute();
  const row = await trx
    .insertInto('automations')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      name: normalizedName(automation.name, NAME_MAX),
      enabled: automation.enabled,
      position: automation.position,
      trigger: JSON.stringify(automation.trigger),
      conditions: JSON.stringify(automation.conditions),
      folded_conditions: automation.foldedConditions ? JSON.stringify(automation.foldedConditions) : null,
      actions: JSON.stringify(automation.actions),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return automationRowToAutomation(row);
}

/**
 * Changes an automation; a new position (1..count, checked by the caller) shifts the automations
 * between its old and new places by one toward the place it left.
 */
export async function updateAutomation(
  trx: Db,
  workspaceId: string,
  current: AutomationRow,
  change: Partial<Definition & { name: string; enabled: boolean; position: number }>,
  now: Date,
): Promise<Automation> {
  const to = change.position ?? current.position;
  const from = current.position;
  if (to !== from) {
    await sql`
      update automations
         set position = case when position < ${from}::int then position + 1 else position - 1 end, updated_at = ${now}::timestamptz
       where workspace_id = ${workspaceId}
         and position between least(${from}::int, ${to}::int) and greatest(${from}::int, ${to}::int)
         and id <> ${current.id}`.execute(trx);
  }
  const row = await trx
    .updateTable('automations')
    .set({
      ...(change.name !== undefined && { name: normalizedName(change.name, NAME_MAX) }),
      ...(change.enabled !== undefined && { enabled: change.enabled }),
      ...(change.trigger !== undefined && { trigger: JSON.stringify(change.trigger) }),
      ...(change.conditions !== undefined && { conditions: JSON.stringify(change.conditions) }),
      ...(change.foldedConditions !== undefined && { folded_conditions: JSON.stringify(change.foldedConditions) }),
      ...(change.actions !== undefined && { actions: JSON.stringify(change.actions) }),
      position: to,
      updated_at: now,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return automationRowToAutomation(row);
}

/** Deletes an automation and moves the later ones up. */
export async function deleteAutomation(trx: Db, workspaceId: string, automation: AutomationRow, now: Date): Promise<void> {
  await trx.deleteFrom('automations').where('workspace_id', '=', workspaceId).where('id', '=', automation.id).execute();
  await trx
    .updateTable('automations')
    .set((eb) => ({ position: eb('position', '-', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>', automation.position)
    .execute();
}

export type ReferenceKind = 'stage' | 'agent' | 'channel';

/**
 * The names of the stages, agents and channels of the workspace among `ids`, keyed `kind:id` (the
 * id lowercase), in one statement: an automation's conditions and actions name them, and they
 * must exist when it is stored.
 */
export async function referencedNames(db: Db, workspaceId: string, ids: Record<ReferenceKind, string[]>): Promise<Map<string, string>> {
  const { rows } = await sql<{ kind: ReferenceKind; id: string; name: string }>`
    select 'stage' as kind, id::text as id, name from stages where workspace_id = ${workspaceId} and id = any(${ids.stage}::uuid[])
    union all
    select 'agent', id::text, name from agents where workspace_id = ${workspaceId} and id = any(${ids.agent}::uuid[])
    union all
    select 'channel', id::text, name from channels where workspace_id = ${workspaceId} and id = any(${ids.channel}::uuid[])`.execute(db);
  return new Map(rows.map((row) => [`${row.kind}:${row.id}`, row.name]));
}

/**
 * What a dry run evaluates on a thread, as stored now, in one statement: the thread, its
 * channel's type, its contact's labels and attributes and its latest inbound message's text.
 * Labels and attributes are read from the rows as JSON, so this reads them where their columns
 * exist and answers null where they do not.
 */
export interface ThreadContextRow {
  status: ThreadStatus;
  stage_id: string;
  agent_id: string | null;
  channel_id: string;
  nps_score: number | null;
  channel_type: string;
  thread_labels: unknown;
  contact_labels: unknown;
  contact_attributes: unknown;
  message_content: string | null;
  /** The id of the button or list row the message tapped. */
  message_reply_id: string | null;
  has_message: boolean;
}

/** The select of readThreadContext, to embed (a run's first statement reads it with the rest). */
export function threadContextQuery(workspaceId: string, threadId: string | null): RawBuilder<ThreadContextRow> {
  return sql<ThreadContextRow>`
    select t.status, t.stage_id, t.agent_id, t.channel_id, t.nps_score, ch.type as channel_type,
           t.labels as thread_labels, c.labels as contact_labels, c.attributes as contact_attributes,
           m.content as message_content, m.interactive->'reply'->>'id' as message_reply_id, m.id is not null as has_message
      from threads t
      join channels ch on ch.workspace_id = t.workspace_id and ch.id = t.channel_id
      join contacts c on c.workspace_id = t.workspace_id and c.id = t.contact_id
      left join lateral (
        select id, content, interactive from messages
         where workspace_id = t.workspace_id and thread_id = t.id and direction = 'inbound'
         order by created_at desc, id desc limit 1) m on true
     where t.workspace_id = ${workspaceId} and t.id = ${threadId}::uuid`;
}

export async function readThreadContext(db: Db, workspaceId: string, threadId: string): Promise<ThreadContextRow | undefined> {
  const { rows } = await threadContextQuery(workspaceId, threadId).execute(db);
  return rows[0];
}
