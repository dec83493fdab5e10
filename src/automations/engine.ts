// Running automations: the queue handlers of `automation-event` (the automations an event
// triggers, in position order) and `automation-idle` (a thread.idle timer falling due). A customer's
// message runs its automations with the same steps (runStartedEvent) in its own transaction instead,
// when no earlier run of its thread waits (inline.ts); one that fails there is queued here. Each job
// runs in ONE transaction that holds the thread's row, applies each run's actions, records the run
// (unique per automation and event or silence) and deletes the job with its COMMIT: a run's effects
// commit once or not at all, whatever instance runs it, restarts or dies (the job's lease hands it
// to another instance, whose transaction starts from nothing; a claim that was lost meanwhile fails
// the COMMIT, and it all rolls back). Round trips are what a run costs, so it reads what it starts
// from in one statement and writes each run with its event in one more.
// The loop guard: an event carries the chain of automations that caused it and the root that
// began it; an automation already in the chain, one at a chain MAX_CAUSATION_DEPTH long, or one
// past the MAX_ROOT_RUNS runs of its root (counted in automation_runs, under the root's lock),
// records a `skipped: loop_prevented` run. Conditions are compiled once per automation version,
// and a run yields to the event loop between automations when it has held it for a while.
import type { Transaction } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { automationActor } from '../actor.js';
import { countRootRuns, startEventRun, startIdleRun, type AutomationRun, type EventRunStart } from '../db/automation-runs.js';
import { afterCommit, transact, type Db } from '../db/database.js';
import { runAtCommit } from '../db/pg-driver.js';
import type { Database } from '../db/schema.js';
import type { AutomationEventPayload } from '../jobs/kinds.js';
import { finishHeldJobQuery, finishJob, type HeldJob, type Job } from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { metrics } from '../metrics/registry.js';
import { recordRun } from '../services/automation-runs.js';
import { settingsToRead, type Settings } from '../services/settings.js';
import { ActionsNeedSavepoints, applyActions, MAX_AUTOMATION_MESSAGES, type RunBudget, type RunTarget } from './actions.js';
import { conditionsHold, type ConditionContext } from './conditions.js';
import { prepareAll, timerAutomation, type PreparedAutomation } from './prepared.js';
import { carryChanges, contactFacts, eventFacts, factsOf, threadFacts, withHours, type Facts, type MessageSeen } from './context.js';

/** Events caused by a chain this long (automation after automation) trigger no more automations. */
export const MAX_CAUSATION_DEPTH = 3;

/** The runs one root event (or silence) may cause through its whole chain of automations. */
export const MAX_ROOT_RUNS = 25;

export const LOOP_PREVENTED = 'loop_prevented';

/** How long a run computes before it lets the event loop serve others (a request, a health check). */
const YIELD_AFTER_MS = 20;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The job's claim was taken by another instance while it ran: its transaction must not commit. */
class ClaimLost extends Error {}

/** An automation's run for one trigger: what it acts on and the key that makes it happen once. */
interface Trigger {
  key: string;
  eventId: string | null;
  target: RunTarget;
  chain: readonly string[];
  /** The event or silence that began the chain. */
  root: string;
  /** What its runs may still do: runs of the root, messages to the thread (spent as they go). */
  budget: RunBudget & { runs: number };
  /** Reads what the conditions see of the records now. */
  facts: () => Promise<Facts | undefined>;
  /** The facts as the run's first statement read them, when it did. */
  first?: Facts | undefined;
  /** What the event's object says of the thread or contact (eventFacts): seen instead of the records' current values. */
  event?: Partial<Facts>;
  /** Each action under a savepoint: the second go of a run where an action did not succeed. */
  savepoints: boolean;
}

/**
 * Runs `run` in a transaction without savepoints, and when an action did not succeed (the
 * transaction rolled back with ActionsNeedSavepoints), once more with them.
 */
async function withRetryUnderSavepoints<T>(db: Db, run: (trx: Transaction<Database>, savepoints: boolean) => Promise<T>): Promise<T> {
  try {
    return await transact(db, (trx) => run(trx, false));
  } catch (err) {
    if (!(err instanceof ActionsNeedSavepoints)) throw claimLostOr(err);
    return transact(db, (trx) => run(trx, true)).catch((again: unknown) => Promise.reject(claimLostOr(again)));
  }
}

/** finishHeldJobQuery's failure (22012, its division by zero rows finished) says what it means. */
function claimLostOr(err: unknown): unknown {
  return (err as { code?: string }).code === '22012' ? new ClaimLost('the job was taken by another instance; this run rolled back', { cause: err }) : err;
}

/**
 * The trigger's automations in order, until one runs `stop`. The context is the event's version of
 * its thread or contact over the records as the run found them, loaded once, and again only after
 * an automation acted: each sees the changes of those before it (carryChanges).
 */
async function runAll(
  trx: Db,
  workspaceId: string,
  automations: readonly PreparedAutomation[],
  trigger: Trigger,
  settings: Readonly<Settings>,
): Promise<boolean> {
  let recorded = false;
  let records: Facts | undefined;
  let seen: Facts | undefined;
  let stale = true;
  let computingSince = performance.now();
  // The context the conditions see: made again when the records changed or time passed (a yield).
  let context: ConditionContext | undefined;
  for (const automation of automations) {
    if (performance.now() - computingSince > YIELD_AFTER_MS) {
      await yieldToLoop();
      computingSince = performance.now();
      context = undefined;
    }
    if (stale) {
      const now = records === undefined ? (trigger.first ?? (await trigger.facts())) : await trigger.facts();
      seen = now && (records === undefined || seen === undefined ? { ...now, ...trigger.event } : carryChanges(seen, records, now));
      records = now;
      context = undefined;
    }
    context ??= seen && withHours(seen, settings, new Date());
    const outcome = await runOne(trx, workspaceId, automation, trigger, context);
    recorded ||= outcome.recorded;
    if (outcome.stop) return recorded;
    stale = outcome.acted;
  }
  return recorded;
}

/**
 * What one automation did for a trigger: whether it ran (a run recorded), whether its actions ran
 * (the context changed), and whether one was `stop`.
 */
interface Outcome {
  recorded: boolean;
  acted: boolean;
  stop: boolean;
}

const NOTHING: Outcome = { recorded: false, acted: false, stop: false };

/**
 * One automation on one trigger: nothing when its conditions do not hold; else a run, skipped by
 * the loop guard or with its actions applied.
 */
async function runOne(trx: Db, workspaceId: string, automation: PreparedAutomation, trigger: Trigger, context: ConditionContext | undefined): Promise<Outcome> {
  if (!context || !conditionsHold(automation.conditions, context)) return NOTHING;
  const now = new Date();
  const looping = trigger.chain.length >= MAX_CAUSATION_DEPTH || trigger.chain.includes(automation.id) || trigger.budget.runs <= 0;
  if (!looping) trigger.budget.runs--;
  const run: AutomationRun = {
    id: uuidv7(),
    automationId: automation.id,
    eventId: trigger.eventId,
    threadId: trigger.target.threadId,
    status: 'skipped',
    reason: LOOP_PREVENTED,
    actions: [],
    createdAt: now.toISOString(),
  };
  const actions = looping
    ? []
    : await applyActions(trx, workspaceId, trigger.target, automationActor(automation.id, trigger.chain, trigger.root), automation.actions, {
        savepoints: trigger.savepoints,
        budget: trigger.budget,
      });
  const failed = actions.find((action) => action.status === 'failed');
  const outcome: AutomationRun = looping ? run : { ...run, actions, status: failed ? 'failed' : 'succeeded', reason: failed?.reason ?? null };
  // Already run for this trigger: an earlier attempt committed it (and ended the job with it, so only a rival holder gets
  // here). The run's record travels with the next statement or the COMMIT, which that then fails (22012: claimLostOr).
  if (!(await recordRun(trx, workspaceId, outcome, { trigger: trigger.key, root: trigger.root }, { atCommit: true })))
    throw new ClaimLost(`automation ${automation.id} already ran for ${trigger.key}`);
  // Counted once the run's record is committed: a run rolled back (and run again) is counted by the attempt that commits.
  afterCommit(trx, () => metrics.automationRuns.inc({ status: outcome.status }));
  return looping ? { ...NOTHING, recorded: true } : { recorded: true, acted: true, stop: automation.actions.some((action) => action.type === 'stop') };
}

/**
 * Ends the job with the run's COMMIT (no round trip of its own); a claim lost meanwhile fails the
 * commit, and everything the run did rolls back.
 */
function finish(trx: Transaction<Database>, job: HeldJob): Promise<void> {
  return runAtCommit(trx, finishHeldJobQuery(job));
}

/** The automations an event triggers, in position order, until one runs `stop`: a job's run, in a transaction of its own. */
export async function runEventAutomations(db: Db, job: Job<'automation-event'>): Promise<void> {
  const { workspace_id: workspaceId, payload } = job;
  await withRetryUnderSavepoints(db, async (trx, savepoints) => {
    await runStartedEvent(trx, workspaceId, payload, await startEventRun(trx, workspaceId, payload), savepoints);
    await finish(trx, job);
  });
}

/**
 * The automations of the event `payload` names, in position order until one runs `stop`, from what
 * startEventRun read in `trx` (a job's transaction, or the event's own: automations/inline.ts);
 * whether any run was recorded.
 */
export async function runStartedEvent(
  trx: Db,
  workspaceId: string,
  payload: AutomationEventPayload,
  start: EventRunStart,
  savepoints: boolean,
): Promise<boolean> {
  const { thread } = start;
  const contactId = thread?.contact_id ?? payload.contactId;
  if (start.automations.length === 0 || !contactId || (!thread && payload.threadId)) return false;
  const automations = await prepareAll(trx, workspaceId, start.automations);
  const object = start.event as { content?: string | null; interactive?: { reply?: { id?: string } } | null } | undefined;
  const message: MessageSeen = payload.trigger.startsWith('message.')
    ? { content: object?.content ?? null, replyId: object?.interactive?.reply?.id ?? null }
    : undefined;
  // A root event's own run is the first of its chain: only the runs its automations caused count what ran before.
  const root = payload.root ?? payload.eventId;
  const ranBefore = payload.chain.length > 0 ? await countRootRuns(trx, workspaceId, root) : 0;
  const trigger: Trigger = {
    key: payload.eventId,
    eventId: payload.eventId,
    target: { threadId: thread?.id ?? null, contactId, channelId: thread?.channel_id ?? null, locked: start.locked },
    chain: payload.chain,
    root,
    budget: { runs: MAX_ROOT_RUNS - ranBefore, messages: MAX_AUTOMATION_MESSAGES - (thread?.automation_messages ?? 0) },
    facts: () => (thread ? threadFacts(trx, workspaceId, thread.id, message) : contactFacts(trx, workspaceId, contactId)),
    first: start.context && factsOf(start.context, message),
    event: eventFacts(payload.trigger, object, start.metric),
    savepoints,
  };
  return runAll(trx, workspaceId, automations, trigger, settingsToRead(start.settings));
}

/**
 * A thread.idle timer: runs its automation when the silence it was set for still holds (the
 * thread open, its last message still the one that began it, on the side the automation waits
 * on, and old enough); otherwise it ends doing nothing. A timer whose automation now waits longer
 * answers the time it falls due instead.
 */
export async function runIdleAutomation(db: Db, job: Job<'automation-idle'>): Promise<Date | undefined> {
  const { workspace_id: workspaceId, payload } = job;
  return withRetryUnderSavepoints(db, async (trx, savepoints) => {
    const start = await startIdleRun(trx, workspaceId, payload);
    const { thread } = start;
    const automation = thread?.status === 'open' && start.automation ? await timerAutomation(trx, workspaceId, start.automation) : undefined;
    const trigger = automation?.trigger;
    const holds =
      thread?.status === 'open' &&
      thread.last_message_id === payload.messageId &&
      automation?.enabled === true &&
      automation.fits &&
      trigger?.event === 'thread.idle' &&
      trigger.waitingOn === (thread.last_message_direction === 'inbound' ? 'agent' : 'customer');
    if (holds && thread.last_message_at) {
      const due = new Date(thread.last_message_at.getTime() + trigger.minutes * 60_000);
      if (due.getTime() > Date.now()) return due;
      await runAll(
        trx,
        workspaceId,
        [automation.prepared],
        {
          key: `idle:${payload.messageId}`,
          eventId: null,
          target: { threadId: thread.id, contactId: thread.contact_id, channelId: thread.channel_id, locked: start.locked },
          chain: [],
          root: `idle:${payload.messageId}`,
          budget: { runs: MAX_ROOT_RUNS, messages: MAX_AUTOMATION_MESSAGES - thread.automation_messages },
          facts: () => threadFacts(trx, workspaceId, thread.id, undefined),
          first: start.context && factsOf(start.context, undefined),
          savepoints,
        },
        settingsToRead(start.settings),
      );
    }
    await finish(trx, job);
    return undefined;
  });
}

/** Retries of a run that threw (the database away, a deadlock): a few, then it is given up and logged. */
const RUN_ATTEMPTS = 5;

type AutomationQueue = 'automation-event' | 'automation-idle';

/** A queue handler for automations' jobs: `run` ends the job itself (or says when to try again), a job given up is logged and ended. */
function automationHandler<Q extends AutomationQueue>(
  queue: Q,
  options: { db: Db; logger: Logger; retryBaseMs: number },
  run: (job: Job<Q>) => Promise<Date | undefined>,
): QueueHandler<Q> {
  const { db, logger } = options;
  return {
    queue,
    maxAttempts: RUN_ATTEMPTS,
    retryBaseMs: options.retryBaseMs,
    async run(job) {
      const later = await run(job);
      return later ? { kind: 'later', runAt: later } : { kind: 'finished' };
    },
    async giveUp(job, lastError) {
      logger.error({ jobId: job.id, queue, payload: job.payload, error: lastError }, 'an automation job given up');
      await finishJob(db, job);
    },
  };
}

export const automationEventHandler = (options: { db: Db; logger: Logger; retryBaseMs: number }): QueueHandler<'automation-event'> =>
  automationHandler('automation-event', options, async (job) => {
    await runEventAutomations(options.db, job);
    return undefined;
  });

export const automationIdleHandler = (options: { db: Db; logger: Logger; retryBaseMs: number }): QueueHandler<'automation-idle'> =>
  automationHandler('automation-idle', options, (job) => runIdleAutomation(options.db, job));
