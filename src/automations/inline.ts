// A customer's message's automations run inline: in the inbound's own transaction, right after its
// message.created is recorded, instead of as an `automation-event` job a worker claims later (the
// automations' consumer, triggers.ts, then queues none for it). The run's effects, its record and
// its events commit with the message or not at all: once per (automation, event) and durable across
// a kill by construction, and no job, NOTIFY, claim or second transaction is spent on it.
// - Order: one thread's automation runs go one after another, in their events' order (the jobs'
//   ordering key `automations:<thread or contact>`). When a job of that key (the thread's, or the
//   contact's) is queued or running, an earlier event's run is not done yet: the message's run is
//   queued behind it as before, not run inline. The read that decides it (startEventRun's) follows
//   the inbound's own writes, jobs its earlier events queued included, with the thread locked (the
//   inbound's update holds it: a worker's run of the thread waits for the inbound, or the inbound for it).
// - The loop guard: an inline run is its event's own, the first of its chain (chain empty, root the
//   event); the events its actions cause queue their runs as every automation's events do.
// - Failure: the actions run under a savepoint, sent with the run's next statement (no round trip of
//   its own), without savepoints of their own. Anything that fails (an action, a statement, the run
//   itself) is rolled back to it, and the run is queued as a job instead: the worker's run tries
//   each action under a savepoint of its own and records those that fail. The message is never lost
//   for its automations' sake. The run's last statements (its record, its events: inserts of new
//   rows that no constraint refuses) travel with the COMMIT, the savepoint's release with them: what
//   could fail those (the database gone, out of space) fails the message's own statements alike.
// - Cost: the workspace's enabled message.received automations are looked up with the inbound's first
//   statement (prepare: a workspace without any pays no round trip); a run reads what it starts from
//   in one statement (startEventRun's, after the message's own), and its actions' writes as a job's do.
// Only a customer's message is recorded inline (message.received, services/receive.ts: Meta's webhook
// and the sandbox); every other trigger, message.sent included, is a job as before. AUTOMATIONS_INLINE=false
// (src/config.ts) queues every run.
import { sql, type Transaction } from 'kysely';
import { startEventRun } from '../db/automation-runs.js';
import { enabledAutomationsWithNext } from '../db/automations.js';
import { afterCommitSince, type Db } from '../db/database.js';
import { runAtCommit } from '../db/pg-driver.js';
import type { Database } from '../db/schema.js';
import type { InlineConsumer, InlineEvent } from '../events/fan-out.js';
import type { AutomationEventPayload } from '../jobs/kinds.js';
import { enqueueQuery, queuedJobsQuery } from '../jobs/queue.js';
import { metrics } from '../metrics/registry.js';
import { runStartedEvent } from './engine.js';

/** The run of a message recorded inline (triggers.ts queues none for it): its job's payload, were it queued. */
function messageRun(event: InlineEvent): AutomationEventPayload | undefined {
  const { type, object } = event;
  if (type !== 'message.created' || typeof object.threadId !== 'string') return undefined;
  const trigger = object.direction === 'inbound' ? 'message.received' : 'message.sent';
  const contactId = typeof object.contactId === 'string' ? object.contactId : null;
  return { eventId: event.id, trigger, threadId: object.threadId, contactId, chain: [], root: event.id };
}

/** SQL: whether an automation-event job of the thread's or the contact's key is queued or running (a run ahead of this one). */
function runAhead(workspaceId: string, run: AutomationEventPayload) {
  const keys = [run.threadId, run.contactId].flatMap((id) => (id ? [`automations:${id}`] : []));
  return sql`(${sql.join(
    keys.map((orderingKey) => sql`exists (${queuedJobsQuery('automation-event', workspaceId, { orderingKey })})`),
    sql` or `,
  )})`;
}

/** Queues the run as triggers.ts would have (with the transaction's next statement or its COMMIT). */
function queueRun(trx: Transaction<Database>, event: InlineEvent, run: AutomationEventPayload): Promise<void> {
  const orderingKey = `automations:${run.threadId ?? run.contactId}`;
  return runAtCommit(trx, enqueueQuery('automation-event', run, { workspaceId: event.workspaceId, orderingKey, runAt: event.now, createdAt: event.now }));
}

/** Undoes the run's work since its savepoint; once more when statements held back failed with the first. */
async function rollBackRun(trx: Db): Promise<void> {
  const rollback = () => sql`rollback to savepoint automations_inline`.execute(trx);
  await rollback().catch(rollback);
}

/** A message's automations run in its transaction: wanted when the workspace has an enabled automation of a message trigger. */
async function runMessageAutomations(trx: Transaction<Database>, event: InlineEvent): Promise<void> {
  const run = messageRun(event);
  if (!run) return;
  // Outside the savepoint: it only reads. The inbound moved the thread's times with its message, so
  // its transaction holds the thread already; the message's object is the event's, as recorded.
  const start = await startEventRun(trx, event.workspaceId, run, {
    ahead: runAhead(event.workspaceId, run),
    recorded: { object: event.object, metric: null },
    held: true,
  });
  if (start.automations.length === 0) return;
  if (start.ahead) {
    metrics.automationsInline.inc({ outcome: 'behind' });
    return queueRun(trx, event, run);
  }
  await runAtCommit(trx, sql`savepoint automations_inline`);
  const counted = afterCommitSince(trx);
  try {
    if (await runStartedEvent(trx, event.workspaceId, run, start, false)) await runAtCommit(trx, sql`release savepoint automations_inline`);
    metrics.automationsInline.inc({ outcome: 'inline' });
  } catch {
    await rollBackRun(trx);
    counted.forget();
    await queueRun(trx, event, run);
    metrics.automationsInline.inc({ outcome: 'failed' });
  }
}

/** The automations' inline part (registered by src/event-consumers.ts). */
export const messageAutomationsInline: InlineConsumer = {
  async prepare(trx, workspaceId) {
    // Only a customer's message is recorded inline, and it triggers message.received alone: a workspace
    // whose message automations are all message.sent has nothing to run here (no read of the run's start).
    const read = await enabledAutomationsWithNext(trx, workspaceId, ['message.received']);
    return async () => (await read.rows())[0]?.enabled ?? false;
  },
  run: runMessageAutomations,
};
