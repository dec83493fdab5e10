// The event log: every change the API exposes is recorded here, in the transaction of the change,
// together with whatever its registered consumers start (events/fan-out.ts): one delivery (and its
// job on the queue) per enabled endpoint subscribed to it, registered here, and the automations
// and AI replies the composition root registers. So a committed change always has its event, its
// webhooks and its jobs, and a rolled-back one has none of them.
// Each event type has one emitter, in the service that makes its change (test/layout.test.ts).
// The event's actor is stored in columns of its own beside `data` (migration 0013), and so is where an
// nps.answered came from (`source`: api or conversation, migration 0023), shown as `data.source`.
import { sql, type RawBuilder, type Transaction } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import { causationOf, rootOf, type Actor } from '../actor.js';
import type { Db } from '../db/database.js';
import { listPage, listSource, type Condition, type PageText } from '../db/pagination.js';
import { runAtCommit } from '../db/pg-driver.js';
import type { Database, EventRow, EventSource, SlaMetric } from '../db/schema.js';
import { enqueueEachQuery, notifyAddedQuery } from '../jobs/queue.js';
import {
  bindInputs,
  fanOut,
  placeholder,
  recordingStatement,
  registerEventConsumer,
  runInlineConsumers,
  statementTemplate,
  type EventConsumer,
  type EventInputs,
  type FanOut,
  type InlineParts,
} from './fan-out.js';

export type Event = components['schemas']['Event'];
export type EventType = components['schemas']['EventType'];

/** The queue webhook deliveries run on. */
export const WEBHOOK_QUEUE = 'webhook-delivery';

/** How long events are kept. */
export const EVENT_RETENTION_DAYS = 30;

/** A UUIDv7 made by PostgreSQL (time-ordered like the service's own ids), for rows a statement fans out. */
const UUID_V7_SQL = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

/** The contact an event is about: erasing them scrubs it. */
function contactOf(type: EventType, object: Record<string, unknown>): string | null {
  if (type === 'contact.created' || type === 'contact.updated' || type === 'contact.merged') return object.id as string;
  return typeof object.contactId === 'string' ? object.contactId : null;
}

/** Options of a recorded event: where an nps.answered came from; a message the service answered itself. */
export interface RecordOptions {
  source?: EventSource | undefined;
  /** Which clock an sla.warning or sla.breached is about. */
  metric?: SlaMetric | undefined;
  /** A message already answered by the service (an NPS score, thanked): no consumer answers it again. */
  answered?: boolean | undefined;
  /** The contacts a contact.merged folded into its object. */
  mergedIds?: string[] | undefined;
  /**
   * The consumers' inline parts prepared for `trx`, a transaction (fan-out.ts prepareInline): they run
   * right after the event's statement, in it, instead of queueing what they do. The automations a
   * customer's message triggers run with the message this way (automations/inline.ts).
   */
  inline?: InlineParts | undefined;
  /**
   * Send the statement with the transaction's next one, or with its COMMIT (db/pg-driver.ts
   * runAtCommit), instead of on its own: no round trip of its own. Its error then fails that
   * statement or the COMMIT, and so the transaction. Outside a transaction it runs at once.
   */
  withNext?: boolean | undefined;
}

/**
 * Records an event of `type` about `object` (as the API returns it), and fans it out to its
 * registered consumers (events/fan-out.ts), among them the workspace's enabled endpoints subscribed
 * to the type (or to '*'): a pending delivery and its job each, announced to the workers with
 * NOTIFY. One statement, of a text compiled once per shape (fan-out.ts recordingStatement); call it
 * with the change's transaction.
 */
export async function recordEvent(
  trx: Db,
  workspaceId: string,
  type: EventType,
  object: object,
  actor: Actor,
  now: Date = new Date(),
  options: RecordOptions = {},
): Promise<string> {
  const id = uuidv7();
  const answered = options.answered ?? false;
  const inline = options.inline !== undefined && options.inline.size > 0 && trx.isTransaction;
  const template = recordingStatement(type, actor.type, { answered, inline }, (consumers) =>
    sql`
    with event_source as (
      select ${placeholder('data')}::jsonb as data, ${placeholder('contactId')}::uuid as contact_id
    ), ${recording()}${consumers.with}
    select 1 as recorded${consumers.notify}`.compile(trx),
  );
  const statement = bindInputs(template, {
    ...eventInputs(workspaceId, id, type, actor, now, options),
    data: JSON.stringify(object),
    contactId: contactOf(type, object as Record<string, unknown>),
  });
  if (options.withNext && trx.isTransaction) await runAtCommit(trx as Transaction<Database>, statement);
  else await trx.executeQuery(statement);
  if (inline)
    await runInlineConsumers(trx as Transaction<Database>, options.inline!, { workspaceId, type, id, object: object as Record<string, unknown>, now });
  return id;
}

/**
 * A change and its event in one statement, so they commit together without a transaction of their
 * own: `change` is the statement's first WITH queries (`name as (...)`, comma-separated, data-
 * modifying ones run whether read or not), `source` a select over them giving the event's object as
 * `data` (jsonb) and its `contact_id`: no row, no event (the change did not apply). The event is
 * fanned out as recordEvent does. The change's own text is compiled on each call, unless it is
 * named (`shape`): its values are then placeholders (fan-out.ts placeholder()) of `inputs`, and
 * the statement is compiled once per shape. True when it was recorded.
 * `withNext` as recordEvent's: the answer is then true unread, for a caller whose `source` fails
 * the statement when the change did not apply (its error fails the transaction).
 */
export async function recordChangeEvent(
  db: Db,
  workspaceId: string,
  type: EventType,
  change: { with: RawBuilder<unknown>; source: RawBuilder<unknown> },
  actor: Actor,
  now: Date = new Date(),
  { withNext = false, shape, inputs = {} }: { withNext?: boolean; shape?: string; inputs?: EventInputs } = {},
): Promise<boolean> {
  const id = uuidv7();
  const compile = (consumers: FanOut) =>
    sql`
    with ${change.with}, event_source as (${change.source}), ${recording()}${consumers.with}
    select exists (select 1 from event) as recorded${consumers.notify}`.compile(db);
  const template =
    shape === undefined
      ? statementTemplate(compile(fanOut(type, actor.type, false, false)))
      : recordingStatement(type, actor.type, { answered: false, inline: false, change: shape }, compile);
  const statement = bindInputs(template, { ...inputs, ...eventInputs(workspaceId, id, type, actor, now) });
  if (withNext && db.isTransaction) {
    await runAtCommit(db as Transaction<Database>, statement);
    return true;
  }
  const result = await db.executeQuery<{ recorded: boolean }>(statement);
  return result.rows[0]?.recorded ?? false;
}

/** An event's values for its statement's placeholders (fan-out.ts RecordedEvent, recording()). */
function eventInputs(workspaceId: string, id: string, type: EventType, actor: Actor, now: Date, options: RecordOptions = {}) {
  return {
    workspaceId,
    id,
    now,
    type,
    chain: JSON.stringify(causationOf(actor)),
    root: rootOf(actor),
    actorType: actor.type,
    actorId: actor.id,
    source: options.source ?? null,
    metric: options.metric ?? null,
    mergedIds: options.mergedIds ?? null,
  };
}

/** The WITH query that inserts the event of `event_source` (if it has a row), returning its id; its values are the event's inputs (eventInputs). */
function recording(): RawBuilder<unknown> {
  const input = placeholder;
  return sql`event as (
      insert into events (workspace_id, id, type, data, contact_id, actor_type, actor_id, source, metric, merged_ids, created_at)
      select ${input('workspaceId')}::uuid, ${input('id')}::uuid, ${input('type')}, s.data, s.contact_id, ${input('actorType')}::text, ${input('actorId')}::uuid,
             ${input('source')}::text, ${input('metric')}::text, ${input('mergedIds')}::uuid[], ${input('now')}::timestamptz
        from event_source s
      returning id
    )`;
}

/**
 * The log's own consumer: a pending delivery and its job (`webhook_jobs`, the queue's builder) per
 * enabled endpoint of the workspace subscribed to the event's type (or to '*').
 */
const webhookDeliveries: EventConsumer = ({ workspaceId, id, type, now }) => ({
  with: sql`, webhook_targets as materialized (
      select e.id as endpoint_id, ${sql.raw(UUID_V7_SQL)} as delivery_id, ${sql.raw(UUID_V7_SQL)} as job_id
        from webhook_endpoints e
       where e.workspace_id = ${workspaceId}::uuid
         and e.enabled
         and (${type} = any (e.events) or '*' = any (e.events))
         and exists (select 1 from event)
    ), webhook_deliveries_added as (
      insert into webhook_deliveries (workspace_id, id, endpoint_id, event_id, status, attempts, next_attempt_at, created_at)
      select ${workspaceId}::uuid, t.delivery_id, t.endpoint_id, ${id}::uuid, 'pending', 0, ${now}::timestamptz, ${now}::timestamptz
        from webhook_targets t
    ), webhook_jobs as (
      ${enqueueEachQuery(WEBHOOK_QUEUE, {
        workspaceId,
        from: sql`webhook_targets t`,
        id: sql`t.job_id`,
        payload: { deliveryId: sql`t.delivery_id`, endpointId: sql`t.endpoint_id` },
        runAt: now,
        createdAt: now,
      })}
    )`,
  notify: sql`, ${notifyAddedQuery(WEBHOOK_QUEUE, 'webhook_jobs')}`,
});

registerEventConsumer('webhook-deliveries', webhookDeliveries);

/** An event's actor as the API shows it: null on events recorded before actors were. */
const actorOf = (row: Pick<EventRow, 'actor_type' | 'actor_id'>): Actor | null => (row.actor_type ? { type: row.actor_type, id: row.actor_id } : null);

/** The columns an event is shown from. */
type EventColumns = Pick<EventRow, 'id' | 'type' | 'data' | 'actor_type' | 'actor_id' | 'source' | 'metric' | 'created_at'> &
  Partial<Pick<EventRow, 'merged_ids'>>;

export function eventRowToEvent(row: EventColumns): Event {
  const data = {
    object: row.data,
    actor: actorOf(row),
    ...(row.source && { source: row.source }),
    ...(row.metric && { metric: row.metric }),
    ...(row.merged_ids && { mergedIds: row.merged_ids }),
  };
  return { id: row.id, type: row.type, createdAt: row.created_at.toISOString(), data } as Event;
}

const ACTOR_JSON = `case when p.actor_type is not null then json_build_object('type', p.actor_type, 'id', p.actor_id) end`;

const eventList = listSource<Event>('events', {
  id: 'id',
  type: 'type',
  createdAt: { instant: 'created_at' },
  data: {
    sql: `case when p.merged_ids is not null
                then json_build_object('object', p.data, 'actor', ${ACTOR_JSON}, 'mergedIds', p.merged_ids)
                when p.source is not null
                then json_build_object('object', p.data, 'actor', ${ACTOR_JSON}, 'source', p.source)
                when p.metric is not null
                then json_build_object('object', p.data, 'actor', ${ACTOR_JSON}, 'metric', p.metric)
                else json_build_object('object', p.data, 'actor', ${ACTOR_JSON}) end`,
  },
});

/** A page of the workspace's events, newest first, of one type when given. */
export async function listEvents(db: Db, workspaceId: string, type: EventType | undefined, page: number, limit: number): Promise<PageText<Event>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (type) where.push(['type = ?', type]);
  return listPage(db, eventList, where, { page, limit, newestFirst: true });
}

export async function getEvent(db: Db, workspaceId: string, id: string): Promise<Event | undefined> {
  const row = await db
    .selectFrom('events')
    .select(['id', 'type', 'data', 'actor_type', 'actor_id', 'source', 'metric', 'merged_ids', 'created_at'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && eventRowToEvent(row);
}

/**
 * Scrubs an erased contact's events as their records are: their contact.created and contact.updated events go (with
 * their deliveries), their messages' events lose `content` and their files' captions and names. Run it in the erasure's transaction.
 */
/** A merge's events: those of `sourceIds` become the target's (GET /contacts/{id}/events, erasure). */
export async function moveContactEvents(trx: Db, workspaceId: string, sourceIds: string[], targetId: string): Promise<void> {
  await sql`update events set contact_id = ${targetId} where workspace_id = ${workspaceId} and contact_id = any (${sourceIds}::uuid[])`.execute(trx);
}

export async function scrubContactEvents(trx: Db, workspaceId: string, contactId: string): Promise<void> {
  await sql`
    delete from events
     where workspace_id = ${workspaceId} and contact_id = ${contactId} and type like 'contact.%'`.execute(trx);
  await sql`
    update events
       set data = jsonb_set(data, '{content}', 'null')
                  || case when jsonb_typeof(data->'attachments') = 'array' and data->'attachments' <> '[]'::jsonb
                          then jsonb_build_object('attachments', (select jsonb_agg(a || '{"caption": null, "filename": null}'::jsonb order by n)
                                                                    from jsonb_array_elements(data->'attachments') with ordinality as e(a, n)))
                          else '{}'::jsonb end
     where workspace_id = ${workspaceId} and contact_id = ${contactId} and type like 'message.%'
       and (data->>'content' is not null or data->'attachments' <> '[]'::jsonb)`.execute(trx);
}

/** Deletes events older than the retention (their deliveries cascade); how many went. */
export async function purgeOldEvents(db: Db, now: Date = new Date()): Promise<number> {
  const before = new Date(now.getTime() - EVENT_RETENTION_DAYS * 86_400_000);
  const result = await db.deleteFrom('events').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
