// The three clocks of a thread (first response, next response, resolution) and what they leave
// behind: a running clock is a row of sla_clocks (its start, and under a policy its due and warning
// times); a response or a closing that stops one writes one sla_metrics row as it happens, which is
// all the response-time report reads. The service layer calls in once per change, in the change's
// transaction (the thread's row is already held by it): onThreadOpened, onThreadChange, onMessage.
// Each one that changes the clocks writes the thread's `sla` (as the API shows it) and moves the
// thread's one timer (timers.ts) to the earliest due or warning time still to come.
// - First response: from opening, reopening or an AI agent's handoff, to the first counting outbound.
// - Next response: from the first inbound after our last outbound (none while the first runs).
// - Resolution: from opening or reopening to closing. Closing stops every clock.
// Counting outbound: a key's or a person's message, or an AI agent's unless the policy is
// humanOnly; never an automation's, a template or an NPS question or thanks. A thread opened by our
// own message starts no first-response clock (nobody waits for us yet).
import { sql, type Insertable, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Actor } from '../actor.js';
import type { Db } from '../db/database.js';
import type { MessageRow, SlaClockRow, SlaMetric, SlaMetricTable, SlaPolicyRow, ThreadRow, ThreadSla } from '../db/schema.js';
import { loadSettings, type Settings } from '../services/settings.js';
import { businessMsBetween, dueAfter } from './business-time.js';
import { choosePolicy, enabledPolicy, policyForAnyThread } from './policies.js';
import { timerQueries } from './timers.js';
import { setThreadSla } from '../db/threads.js';

type NewSlaMetric = Insertable<SlaMetricTable>;

const TARGET: Record<SlaMetric, 'firstResponseMinutes' | 'nextResponseMinutes' | 'resolutionMinutes'> = {
  firstResponse: 'firstResponseMinutes',
  nextResponse: 'nextResponseMinutes',
  resolution: 'resolutionMinutes',
};

/** The thread's clocks, as they run now. */
async function clocksOf(trx: Db, workspaceId: string, threadId: string): Promise<SlaClockRow[]> {
  return trx.selectFrom('sla_clocks').selectAll().where('workspace_id', '=', workspaceId).where('thread_id', '=', threadId).forUpdate().execute();
}

/** The policy `id`: an enabled one from the policies cache, else (disabled or deleted since, or not seen yet here) as stored. */
async function policyOf(trx: Db, workspaceId: string, id: string | null | undefined): Promise<SlaPolicyRow | undefined> {
  if (!id) return undefined;
  const cached = await enabledPolicy(trx, workspaceId, id);
  if (cached) return cached;
  return trx.selectFrom('sla_policies').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
}

/** The workspace's settings, read at the first call only (a path that needs none reads none). */
function lazySettings(trx: Db, workspaceId: string): () => Promise<Settings> {
  let loaded: Promise<Settings> | undefined;
  return () => (loaded ??= loadSettings(trx, workspaceId));
}

/** The settings a policy's due times need: its business hours, when it counts in them (else none is read). */
async function hoursFor(policy: SlaPolicyRow | undefined, settings: () => Promise<Settings>): Promise<Settings | undefined> {
  return policy?.business_hours_only ? settings() : undefined;
}

/** Whether a clock has a due or warning time, so the thread may have a timer for it. */
const timed = (clocks: readonly SlaClockRow[]): boolean => clocks.some((clock) => clock.due_at !== null || clock.warn_at !== null);

/** Whether two `sla` values are equal (field by field: a stored one comes back with its keys in jsonb's order). */
function sameSla(a: ThreadSla | null | undefined, b: ThreadSla | null): boolean {
  if (!a || !b) return !a && !b;
  return (
    a.policyId === b.policyId &&
    a.firstResponseDueAt === b.firstResponseDueAt &&
    a.nextResponseDueAt === b.nextResponseDueAt &&
    a.resolutionDueAt === b.resolutionDueAt &&
    a.status === b.status &&
    a.breached.length === b.breached.length &&
    a.breached.every((metric, i) => b.breached[i] === metric)
  );
}

const time = (date: Date | null): number | null => (date ? new Date(date).getTime() : null);

/** Whether two lists of a thread's clocks are the same clocks with the same times and flags. */
function sameClocks(a: readonly SlaClockRow[], b: readonly SlaClockRow[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((clock) => {
    const other = b.find((c) => c.metric === clock.metric);
    return (
      other !== undefined &&
      time(other.started_at) === time(clock.started_at) &&
      (other.policy_id ?? null) === (clock.policy_id ?? null) &&
      time(other.due_at) === time(clock.due_at) &&
      time(other.warn_at) === time(clock.warn_at) &&
      other.warned === clock.warned &&
      other.breached === clock.breached
    );
  });
}

/** A clock of `metric` started at `startedAt`, its due and warning times under `policy` (`settings` needed only when it counts in business hours). */
export function timedClock(
  workspaceId: string,
  threadId: string,
  metric: SlaMetric,
  startedAt: Date,
  policy: SlaPolicyRow | undefined,
  settings: Settings | undefined,
  flags: { warned: boolean; breached: boolean } = { warned: false, breached: false },
): SlaClockRow {
  const minutes = policy?.targets[TARGET[metric]];
  const due = policy && minutes !== undefined ? dueAfter(settings, startedAt, minutes, policy.business_hours_only) : null;
  const warnBefore = policy?.warn_before_minutes ?? null;
  const warn =
    policy && minutes !== undefined && warnBefore !== null
      ? warnBefore >= minutes
        ? startedAt
        : dueAfter(settings, startedAt, minutes - warnBefore, policy.business_hours_only)
      : null;
  return {
    workspace_id: workspaceId,
    thread_id: threadId,
    metric,
    started_at: startedAt,
    policy_id: due ? policy!.id : null,
    due_at: due,
    warn_at: warn,
    ...flags,
  };
}

/** The thread's `sla` for its policy and running clocks; null without a policy. */
export function slaOf(policyId: string | null, clocks: readonly SlaClockRow[], breached: readonly SlaMetric[]): ThreadSla | null {
  if (!policyId) return null;
  const due = (metric: SlaMetric) => clocks.find((clock) => clock.metric === metric)?.due_at?.toISOString() ?? null;
  const timed = clocks.filter((clock) => clock.due_at !== null);
  const status: ThreadSla['status'] =
    breached.length > 0 ? 'breached' : timed.some((clock) => clock.warned) ? 'warning' : timed.length > 0 ? 'active' : 'achieved';
  return {
    policyId,
    firstResponseDueAt: due('firstResponse'),
    nextResponseDueAt: due('nextResponse'),
    resolutionDueAt: due('resolution'),
    status,
    breached: [...breached],
  };
}

/**
 * Stores the thread's clocks as `clocks` (those not listed stop), its `sla`, its timer and the
 * `metrics` the change recorded, in one statement; the thread as it is now. In the caller's
 * transaction. `thread` and `before` (its clocks as stored, already deleted when `deleted`) let it
 * write only what changes: nothing when the clocks and the `sla` are the same; of the clocks, those
 * stopped, started or moved (a moved one is written over); the `sla` only when it differs; the
 * timer only when the earliest time still to record moved (timerQueries; `opened`: the thread
 * opened in this transaction has none yet).
 */
export async function writeClocks(
  trx: Db,
  thread: ThreadRow,
  before: readonly SlaClockRow[],
  clocks: readonly SlaClockRow[],
  sla: ThreadSla | null,
  { deleted = false, metrics = [], opened = false }: { deleted?: boolean; metrics?: readonly NewSlaMetric[]; opened?: boolean } = {},
): Promise<ThreadRow> {
  const { workspace_id: workspaceId, id: threadId } = thread;
  const kept = before.filter((old) => clocks.some((clock) => sameClocks([old], [clock])));
  const added = clocks.filter((clock) => !kept.some((old) => old.metric === clock.metric));
  const replaced = before.filter((old) => !kept.includes(old));
  const queries: RawBuilder<unknown>[] = [];
  if (metrics.length > 0) queries.push(sql`sla_metrics_recorded as (${trx.insertInto('sla_metrics').values([...metrics])})`);
  const stopped = deleted ? [] : replaced.filter((old) => !clocks.some((clock) => clock.metric === old.metric)).map((old) => old.metric);
  if (stopped.length > 0) {
    queries.push(
      sql`sla_clocks_stopped as (${trx.deleteFrom('sla_clocks').where('workspace_id', '=', workspaceId).where('thread_id', '=', threadId).where('metric', 'in', stopped)})`,
    );
  }
  if (added.length > 0) {
    // A moved clock (same metric, other start, times or flags) is written over its row: its delete
    // and insert in one statement would meet on the key.
    const insert = trx
      .insertInto('sla_clocks')
      .values([...added])
      .onConflict((oc) =>
        oc.columns(['workspace_id', 'thread_id', 'metric']).doUpdateSet((eb) => ({
          started_at: eb.ref('excluded.started_at'),
          policy_id: eb.ref('excluded.policy_id'),
          due_at: eb.ref('excluded.due_at'),
          warn_at: eb.ref('excluded.warn_at'),
          warned: eb.ref('excluded.warned'),
          breached: eb.ref('excluded.breached'),
        })),
      );
    queries.push(sql`sla_clocks_started as (${insert})`);
  }
  const timers = timed(before) || timed(clocks) ? timerQueries(workspaceId, threadId, { before, after: clocks, opened }) : undefined;
  queries.push(...(timers?.with ?? []));
  if (!sameSla(thread.sla, sla)) return setThreadSla(trx, workspaceId, threadId, sla, { with: queries, select: timers?.select });
  if (queries.length > 0) await sql`with ${sql.join(queries)} select ${timers?.select ?? sql`1`}`.execute(trx);
  return thread;
}

/** The metric row of a clock stopped at `at` by a response or a closing (written with the clocks' change, writeClocks). */
function metricOf(
  thread: Pick<ThreadRow, 'workspace_id' | 'id' | 'channel_id' | 'stage_id'>,
  clock: SlaClockRow,
  at: Date,
  who: { agentId: string | null; byAi: boolean | null },
  settings: Settings,
): NewSlaMetric {
  return {
    workspace_id: thread.workspace_id,
    id: uuidv7(),
    thread_id: thread.id,
    metric: clock.metric,
    channel_id: thread.channel_id,
    stage_id: thread.stage_id,
    agent_id: who.agentId,
    by_ai: clock.metric === 'firstResponse' ? who.byAi : null,
    started_at: clock.started_at,
    happened_at: at,
    seconds: Math.max(0, at.getTime() - clock.started_at.getTime()) / 1000,
    business_seconds: businessMsBetween(settings, clock.started_at, at) / 1000,
    policy_id: clock.policy_id,
    due_at: clock.due_at,
    within_sla: clock.due_at ? at.getTime() <= clock.due_at.getTime() : null,
  };
}

/** A cycle's clocks as they start (first response and resolution) and the thread's `sla` with them. */
export interface Cycle {
  clocks: SlaClockRow[];
  sla: ThreadSla | null;
}

/** The clocks of a cycle started at `at` under `policy`. */
async function cycleUnder(
  workspaceId: string,
  threadId: string,
  at: Date,
  policy: SlaPolicyRow | undefined,
  settings: () => Promise<Settings>,
): Promise<Cycle> {
  const loaded = await hoursFor(policy, settings);
  const clocks = (['firstResponse', 'resolution'] as const).map((metric) => timedClock(workspaceId, threadId, metric, at, policy, loaded));
  return { clocks, sla: slaOf(policy?.id ?? null, clocks, []) };
}

/** The clocks of a cycle started at `at` under the policy that applies to the thread now. */
async function cycleChosenNow(trx: Db, thread: ThreadRow, at: Date): Promise<Cycle> {
  const settings = lazySettings(trx, thread.workspace_id);
  const policy = await choosePolicy(trx, thread.workspace_id, thread.id, settings, at);
  return cycleUnder(thread.workspace_id, thread.id, at, policy, settings);
}

/** Clocks started at `at` under the policy that applies now (opening, reopening), or as `cycle` computed them. */
async function startCycle(trx: Db, thread: ThreadRow, at: Date, before: readonly SlaClockRow[] | 'none', cycle?: Cycle): Promise<ThreadRow> {
  const { clocks, sla } = cycle ?? (await cycleChosenNow(trx, thread, at));
  const old = before === 'none' ? [] : before;
  return writeClocks(trx, thread, old, clocks, sla, { opened: before === 'none' });
}

/**
 * The cycle of thread `threadId` opening at `at`, before it is stored, when its policy is chosen
 * without its facts (policies.ts policyForAnyThread); undefined when conditions must see the thread.
 * Its `sla` goes into the thread's insert, so the opening writes the thread's row once.
 */
export async function openingCycle(trx: Db, workspaceId: string, threadId: string, at: Date): Promise<Cycle | undefined> {
  const known = await policyForAnyThread(trx, workspaceId);
  return known && cycleUnder(workspaceId, threadId, at, known.policy, lazySettings(trx, workspaceId));
}

/**
 * A thread just opened (no clocks, no timers yet; its `sla` null, or `cycle`'s when openingCycle
 * computed it for the insert): its first-response and resolution clocks start at its creation.
 * Returns the thread with its `sla`.
 */
export async function onThreadOpened(trx: Db, thread: ThreadRow, cycle?: Cycle): Promise<ThreadRow> {
  return startCycle(trx, thread, thread.created_at, 'none', cycle);
}

const breachedOf = (thread: ThreadRow): SlaMetric[] => thread.sla?.breached ?? [];

/**
 * A thread changed from `before` to `after` by `actor`: closing stops every clock (a resolution
 * metric), reopening starts a new cycle, an AI agent's handoff restarts the first-response clock,
 * a new stage or labels choose the policy again (its targets counting from the running clocks'
 * starts). Returns the thread with its `sla`.
 */
export async function onThreadChange(trx: Db, before: ThreadRow | undefined, after: ThreadRow, actor: Actor, now: Date): Promise<ThreadRow> {
  if (!before) return after;
  const { workspace_id: workspaceId, id } = after;
  if (before.status === 'open' && after.status === 'closed') {
    // One statement stops every clock and answers them.
    const { rows } = await sql<{ clocks: SlaClockRow[] | null }>`
      with gone as (delete from sla_clocks where workspace_id = ${workspaceId} and thread_id = ${id} returning *)
      select (select json_agg(gone) from gone) as clocks`.execute(trx);
    const clocks = (rows[0]?.clocks ?? []).map(clockFromJson);
    const resolution = clocks.find((clock) => clock.metric === 'resolution');
    const metrics = resolution ? [metricOf(after, resolution, now, { agentId: after.agent_id, byAi: null }, await loadSettings(trx, workspaceId))] : [];
    return writeClocks(trx, after, clocks, [], after.sla ? slaOf(after.sla.policyId, [], breachedOf(after)) : null, { deleted: true, metrics });
  }
  if (before.status === 'closed' && after.status === 'open') return startCycle(trx, after, now, await clocksOf(trx, workspaceId, id));
  if (after.status !== 'open') return after;
  const handoff = actor.type === 'agent' && before.agent_id !== after.agent_id;
  const regroup = before.stage_id !== after.stage_id || JSON.stringify(before.labels) !== JSON.stringify(after.labels);
  if (!handoff && !regroup) return after;
  const settings = lazySettings(trx, workspaceId);
  const policy = regroup ? await choosePolicy(trx, workspaceId, id, settings, now) : await policyOf(trx, workspaceId, after.sla?.policyId);
  // A regroup under no policy, held to none before: the clocks run on without due times as they are.
  if (!handoff && !policy && !after.sla) return after;
  const current = await clocksOf(trx, workspaceId, id);
  const loaded = await hoursFor(policy, settings);
  const clocks = handoff ? handedOff(current, workspaceId, id, now, policy, loaded) : current;
  return retime(trx, after, current, clocks, policy, loaded);
}

/** A clock as json_agg answers it (times as text). */
function clockFromJson(row: SlaClockRow): SlaClockRow {
  const at = (value: Date | string | null): Date | null => (value === null ? null : new Date(value));
  return { ...row, started_at: at(row.started_at)!, due_at: at(row.due_at), warn_at: at(row.warn_at) };
}

/** An AI agent's threads handed to people: the first-response clock starts again now (the next-response clock stops). */
function handedOff(
  clocks: readonly SlaClockRow[],
  workspaceId: string,
  threadId: string,
  now: Date,
  policy: SlaPolicyRow | undefined,
  settings: Settings | undefined,
): SlaClockRow[] {
  return [...clocks.filter((clock) => clock.metric === 'resolution'), timedClock(workspaceId, threadId, 'firstResponse', now, policy, settings)];
}

/** The running clocks held to `policy` (none: no due times), counting from their starts; what each recorded stays recorded. */
async function retime(
  trx: Db,
  thread: ThreadRow,
  before: readonly SlaClockRow[],
  clocks: readonly SlaClockRow[],
  policy: SlaPolicyRow | undefined,
  settings: Settings | undefined,
): Promise<ThreadRow> {
  const { workspace_id: workspaceId, id } = thread;
  const timed = clocks.map((clock) => ({
    ...timedClock(workspaceId, id, clock.metric, clock.started_at, policy, settings),
    warned: clock.warned,
    breached: clock.breached,
  }));
  return writeClocks(trx, thread, before, timed, slaOf(policy?.id ?? null, timed, breachedOf(thread)));
}

/**
 * The open threads of a deleted AI agent (unassigned by the deletion): nobody answers them now, as
 * after its handoff to people, so each one's first-response clock starts again at `now`. `threads`
 * as they are after the deletion; answers them with their `sla`. In the deletion's transaction.
 */
export async function onAiAgentGone(trx: Db, threads: readonly ThreadRow[], now: Date): Promise<ThreadRow[]> {
  const open = threads.filter((thread) => thread.status === 'open');
  if (open.length === 0) return [...threads];
  const workspaceId = open[0]!.workspace_id;
  const settings = await loadSettings(trx, workspaceId);
  const moved = new Map<string, ThreadRow>();
  for (const thread of open) {
    const policy = await policyOf(trx, workspaceId, thread.sla?.policyId);
    const current = await clocksOf(trx, workspaceId, thread.id);
    const clocks = handedOff(current, workspaceId, thread.id, now, policy, settings);
    moved.set(thread.id, await retime(trx, thread, current, clocks, policy, settings));
  }
  return threads.map((thread) => moved.get(thread.id) ?? thread);
}

/**
 * A policy changed or was deleted (`policyId`; the caller holds the workspace's policies lock, the
 * change made): the open threads held to it move their running clocks' due and warning times, and
 * their timers, at once. Still enabled, it holds them with its new targets, business hours and
 * warning, counting from the clocks' starts. Disabled or deleted, each thread is held to the policy
 * that applies now (the first enabled one whose conditions hold, as when a stage changes), or to
 * none: then its clocks run without due times and its `sla` is null. A warning or breach already
 * recorded stays recorded (once per clock); a due time moved into the past breaches within 5 s.
 * A change of a policy's conditions or position, and a new or re-enabled policy, apply at each
 * thread's next opening, reopening, stage or labels change. Answers how many threads moved.
 */
export async function onPolicyChanged(trx: Db, workspaceId: string, policyId: string, now: Date): Promise<number> {
  const { rows: threads } = await sql<ThreadRow>`
    select * from threads
     where workspace_id = ${workspaceId} and status = 'open' and sla ->> 'policyId' = ${policyId}
     order by id
       for update`.execute(trx);
  if (threads.length === 0) return 0;
  const settings = await loadSettings(trx, workspaceId);
  const policy = await policyOf(trx, workspaceId, policyId);
  for (const thread of threads) {
    const held = policy?.enabled ? policy : await choosePolicy(trx, workspaceId, thread.id, () => Promise.resolve(settings), now);
    const current = await clocksOf(trx, workspaceId, thread.id);
    await retime(trx, thread, current, current, held, settings);
  }
  return threads.length;
}

/** Whether an outbound message is an answer of ours that stops a response clock (before the policy's humanOnly). */
function counts(message: MessageRow, actor: Actor, nps: boolean): boolean {
  return !nps && message.automation_id === null && message.template === null && actor.type !== 'automation' && actor.type !== 'system';
}

/**
 * A message was added to a thread (sent or received; `nps` for the NPS question and thanks;
 * `threadOpened` when the thread was opened for it in the same transaction): an
 * inbound one starts the next-response clock when no response clock runs; a counting outbound one
 * stops the running response clock with its metric.
 */
export async function onMessage(trx: Db, message: MessageRow, actor: Actor, options: { nps?: boolean; threadOpened?: boolean } = {}): Promise<void> {
  if (message.direction === 'outbound' && !counts(message, actor, options.nps ?? false)) return;
  // A customer's message on the thread opened for it: onThreadOpened started its first-response
  // clock in this transaction, so the message starts none; nothing to read.
  if (message.direction === 'inbound' && options.threadOpened) return;
  const { workspace_id: workspaceId, thread_id: threadId } = message;
  // The thread and its clocks in one statement (the thread's row is held by the message's transaction).
  const { rows } = await sql<ThreadRow & { clocks: SlaClockRow[] }>`
    select t.*, coalesce((select json_agg(c) from sla_clocks c
                           where c.workspace_id = t.workspace_id and c.thread_id = t.id), '[]') as clocks
      from threads t where t.workspace_id = ${workspaceId} and t.id = ${threadId}`.execute(trx);
  const found = rows[0];
  if (!found || found.status !== 'open') return;
  const { clocks: stored, ...rest0 } = found;
  const thread: ThreadRow = rest0;
  const clocks = stored.map(clockFromJson);
  const responding = clocks.some((clock) => clock.metric === 'firstResponse' || clock.metric === 'nextResponse');
  if (message.direction === 'inbound') {
    if (responding) return;
    const policy = await policyOf(trx, workspaceId, thread.sla?.policyId);
    const hours = await hoursFor(policy, lazySettings(trx, workspaceId));
    const next = [...clocks, timedClock(workspaceId, threadId, 'nextResponse', message.created_at, policy, hours)];
    await writeClocks(trx, thread, clocks, next, slaOf(thread.sla?.policyId ?? null, next, breachedOf(thread)));
    return;
  }
  if (!responding) return;
  const clock = clocks.find((c) => c.metric === 'firstResponse') ?? clocks.find((c) => c.metric === 'nextResponse')!;
  const byAi = actor.type === 'agent';
  if (byAi && (await policyOf(trx, workspaceId, clock.policy_id ?? thread.sla?.policyId))?.human_only) return;
  const rest = clocks.filter((c) => c !== clock);
  // Our own message opening the thread: nobody was waiting for it.
  const metrics = !(clock.metric === 'firstResponse' && clock.started_at.getTime() >= message.created_at.getTime())
    ? [metricOf(thread, clock, message.created_at, { agentId: message.agent_id, byAi }, await loadSettings(trx, workspaceId))]
    : [];
  await writeClocks(trx, thread, clocks, rest, slaOf(thread.sla?.policyId ?? null, rest, breachedOf(thread)), { metrics });
}
