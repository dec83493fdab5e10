// Where automations hook into the event log: a consumer of the log's fan-out (events/fan-out.ts,
// registered by src/event-consumers.ts) whose WITH queries join the statement recording an event,
// so what the event starts commits with it, in the change's transaction, and costs no round trip
// of its own.
// - An event that is a trigger (message.created is `message.received` or `message.sent` by its
//   direction) queues one `automation-event` job when the workspace has an enabled automation
//   with that trigger, on the ordering key of its thread (or contact), so one thread's events run
//   their automations one after another, in order. The job carries the loop guard's chain and
//   root (the event that began the chain, whose runs are bounded in number). A message recorded
//   inline (a customer's: services/receive.ts) queues none: its automations run in its own
//   transaction right after it (inline.ts), which queues the job itself when they cannot.
// - thread.idle timers are `automation-idle` jobs due when a silence has lasted its minutes, keyed
//   `idle:<thread id>` (due time as their place in the key's order, so the earliest fires first):
//   a message.created (not an automation's: those are no turn in the conversation) cancels the
//   thread's waiting timers and schedules one per enabled idle automation waiting on the side that
//   must answer now; a thread.updated that closes the thread
//   cancels them. No scan of threads ever looks for silences when timers fire; an idle automation
//   that starts waiting (created, enabled, its trigger changed) schedules, once, a timer for each
//   silence already under way, and one that stops waiting deletes its waiting timers.
import { sql, type RawBuilder } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Db } from '../db/database.js';
import { cancelWaitingQuery, enqueueEachQuery, notifyAddedQuery, runningJobsQuery } from '../jobs/queue.js';
import type { EventConsumer } from '../events/fan-out.js';

/** A UUIDv7 made by PostgreSQL, for rows a statement fans out. */
const UUID_V7 = sql.raw(
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`,
);

type EventType = components['schemas']['EventType'];

/** The trigger an event is, as an SQL expression over `s` (its object); null when it is none. */
function triggerOf(type: EventType): RawBuilder<unknown> | null {
  switch (type) {
    case 'contact.created':
    case 'thread.created':
    case 'thread.updated':
    case 'nps.answered':
    case 'sla.warning':
    case 'sla.breached':
      return sql`${type}::text`;
    case 'message.created':
      return sql`case s.data->>'direction' when 'inbound' then 'message.received' else 'message.sent' end`;
    default:
      return null;
  }
}

/** The thread an event's object belongs to (SQL text over `s`; ids are kept as text, never cast, so no event fails for it). */
function threadOf(type: EventType): RawBuilder<unknown> {
  if (type === 'contact.created') return sql`null::text`;
  if (type === 'message.created') return sql`s.data->>'threadId'`;
  return sql`s.data->>'id'`;
}

/**
 * The WITH query `idle_scheduled`: one timer (an `automation-idle` job due at `due_at`, keyed by its
 * thread) per row of the WITH query `idle_targets` (thread_id, message_id, due_at, job_id), for
 * `automationId` (an SQL expression over those rows).
 */
function idleScheduledQuery(workspaceId: string, automationId: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`idle_scheduled as (
      ${enqueueEachQuery('automation-idle', {
        workspaceId,
        from: sql`idle_targets t`,
        id: sql`t.job_id`,
        orderingKey: sql`'idle:' || t.thread_id`,
        payload: { automationId, threadId: sql`t.thread_id`, messageId: sql`t.message_id` },
        runAt: sql`t.due_at`,
        createdAt: sql`t.due_at`,
      })}
    )`;
}

/**
 * The WITH queries `automation_targets` and `automation_jobs`: the event's run queued (one
 * `automation-event` job on its thread's, or contact's, ordering key) when the workspace has an
 * enabled automation of its trigger (the row of `automation_source`).
 */
function queuedRuns(workspaceId: string, eventId: string, now: Date, chain: string, root: string): RawBuilder<unknown> {
  return sql`automation_targets as materialized (
      select t.trigger, t.thread_id, t.contact_id, ${UUID_V7} as job_id
        from automation_source t
       where exists (select 1 from automations a
                      where a.workspace_id = ${workspaceId}::uuid and a.enabled and a.trigger->>'event' = t.trigger)
    ), automation_jobs as (
      ${enqueueEachQuery('automation-event', {
        workspaceId,
        from: sql`automation_targets t`,
        id: sql`t.job_id`,
        orderingKey: sql`'automations:' || coalesce(t.thread_id, t.contact_id)`,
        payload: {
          eventId: sql`${eventId}::uuid`,
          trigger: sql`t.trigger`,
          threadId: sql`t.thread_id`,
          contactId: sql`t.contact_id`,
          chain: sql`${chain}::jsonb`,
          root: sql`coalesce(${root}::text, ${eventId}::text)`,
        },
        runAt: now,
        createdAt: now,
      })}
    )`;
}

/** The automations' consumer of the event log: the runs an event triggers, the idle timers it starts or ends. */
export const automationTriggers: EventConsumer = ({ workspaceId, type, id: eventId, actorType, now, chain, root, inline }) => {
  const trigger = triggerOf(type);
  if (!trigger) return undefined;
  const contact = type === 'contact.created' ? sql`s.data->>'id'` : sql`s.data->>'contactId'`;
  const source = sql`automation_source as materialized (
      select ${trigger} as trigger, ${threadOf(type)} as thread_id, ${contact} as contact_id
        from event_source s
       where exists (select 1 from event)
    )`;
  // A customer's message recorded inline runs its automations itself (inline.ts): no job for it.
  const runsInline = inline && type === 'message.created';
  const parts = runsInline ? [source] : [sql`${source}, ${queuedRuns(workspaceId, eventId, now, chain, root)}`];
  const notify = runsInline ? [] : [sql`, ${notifyAddedQuery('automation-event', 'automation_jobs')}`];
  // Automations' own messages neither start nor end a silence (a reminder must not time the next one).
  if (type === 'message.created' && actorType !== 'automation') {
    // The silence this message begins: the customer's turn after ours (waitingOn customer), ours after theirs (agent).
    parts.push(sql`idle_cancelled as (
      ${cancelWaitingQuery('automation-idle', workspaceId, { orderingKey: sql`'idle:' || (select thread_id from automation_source)` })}
    ), idle_targets as materialized (
      select a.id as automation_id, t.thread_id, s.data->>'id' as message_id,
             (s.data->>'createdAt')::timestamptz + (a.trigger->>'minutes')::int * interval '1 minute' as due_at, ${UUID_V7} as job_id
        from automation_source t, event_source s, automations a
       where a.workspace_id = ${workspaceId}::uuid and a.enabled and a.trigger->>'event' = 'thread.idle'
         and a.trigger->>'waitingOn' = case s.data->>'direction' when 'inbound' then 'agent' else 'customer' end
    ), ${idleScheduledQuery(workspaceId, sql`t.automation_id`)}`);
    notify.push(sql`, ${notifyAddedQuery('automation-idle', 'idle_scheduled')}`);
  }
  if (type === 'thread.updated') {
    parts.push(sql`idle_cancelled as (
      ${cancelWaitingQuery('automation-idle', workspaceId, { orderingKey: sql`(select 'idle:' || (data->>'id') from event_source where data->>'status' = 'closed')` })}
    )`);
  }
  return { with: sql`, ${sql.join(parts, sql`, `)}`, notify: sql.join(notify, sql``) };
};

type IdleTrigger = components['schemas']['AutomationIdleTrigger'];

/** How many open threads one statement of resetIdleTimers looks at: each statement stays well under the statement timeout. */
export const RESET_BATCH = 5_000;

/**
 * An idle automation's timers after it changed: its waiting timers are deleted, and when it now
 * waits (`trigger`: it is enabled with this thread.idle trigger) one is scheduled per silence
 * already under way (an open thread whose last message leaves it waiting on that side), unless
 * this automation already ran for that silence or a timer of it for that silence is running. A
 * silence older than `minutes` already falls due at once. In the change's transaction, a statement
 * per `batch` open threads (in id order), so that a workspace of any size stays under the
 * statement timeout; it reads the workspace's open threads once, never when timers fire.
 */
export async function resetIdleTimers(
  trx: Db,
  workspaceId: string,
  automationId: string,
  trigger: IdleTrigger | undefined,
  batch: number = RESET_BATCH,
): Promise<void> {
  await sql`with idle_cancelled as (
    ${cancelWaitingQuery('automation-idle', workspaceId, { payload: { automationId } })}
  ) select count(*) from idle_cancelled`.execute(trx);
  if (!trigger) return;
  const lastDirection = trigger.waitingOn === 'customer' ? 'outbound' : 'inbound';
  // The waiting timers deleted above are gone for the statements below: only a held (running) timer counts as scheduled.
  for (let after: string | null = null; ;) {
    const { rows }: { rows: Array<{ last: string | null; threads: number }> } = await sql<{ last: string | null; threads: number }>`
      with batch as materialized (
        select t.id from threads t
         where t.workspace_id = ${workspaceId}::uuid and t.status = 'open' and t.id > coalesce(${after}::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
         order by t.id limit ${batch}
      ), idle_targets as materialized (
        select b.id::text as thread_id, m.id::text as message_id, m.created_at + ${trigger.minutes}::int * interval '1 minute' as due_at,
               ${UUID_V7} as job_id
          from batch b
         cross join lateral (
           select id, created_at, direction from messages
            where workspace_id = ${workspaceId}::uuid and thread_id = b.id and automation_id is null
            order by created_at desc, id desc limit 1) m
         where m.direction = ${lastDirection}
           and not exists (select 1 from automation_runs r
                            where r.workspace_id = ${workspaceId}::uuid and r.automation_id = ${automationId}::uuid
                              and r.trigger_key = 'idle:' || m.id::text)
           and not exists (${runningJobsQuery('automation-idle', workspaceId, {
             orderingKey: sql`'idle:' || b.id::text`,
             payload: { automationId, messageId: sql`m.id::text` },
           })})
      ), ${idleScheduledQuery(workspaceId, sql`${automationId}::text`)}
      select (select id::text from batch order by id desc limit 1) as last, (select count(*)::int from batch) as threads,
             ${notifyAddedQuery('automation-idle', 'idle_scheduled')}`.execute(trx);
    const row: { last: string | null; threads: number } = rows[0]!;
    if (row.threads < batch || row.last === null) return;
    after = row.last;
  }
}
