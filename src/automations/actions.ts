// An automation's actions applied to a thread (or a contact), in the run's transaction, each by the
// service that owns its change, with the automation as the actor. Each action counts on its own:
// one that fails (a stage deleted since the automation was written, a thread that cannot reopen)
// is rolled back alone (a savepoint) and reported, and the next ones still run. Savepoints cost two
// round trips an action, so a run first goes without; the rare run where an action does not
// succeed is rolled back and run again with them (applyActions, engine.ts). Without savepoints,
// consecutive actions on the thread's own fields (stage, status, agent, labels) are one change of
// the thread: one write, one history entry per field, one thread.updated, as a PATCH of those
// fields would be (a thread change costs some ten statements with its service levels and event).
import { sql } from 'kysely';
import type { components } from '../../generated/api.js';
import type { AutomationActor } from '../actor.js';
import type { AutomationRunAction } from '../db/automation-runs.js';
import { lockContact } from '../db/contacts.js';
import type { Db } from '../db/database.js';
import type { ThreadRow } from '../db/schema.js';
import type { VersionedThread } from '../db/threads.js';
import { ApiError } from '../errors.js';
import { updateContact } from '../services/contacts.js';
import { MAX_ATTRIBUTES, MAX_LABELS, normalizeLabels } from '../services/labels.js';
import { sendMessage } from '../services/messages.js';
import { requestNps } from '../services/nps-requests.js';
import { assignRoundRobin } from '../services/round-robin.js';
import { changeThread, type ThreadChange } from '../services/threads.js';
import { foldCase } from '../text.js';

type Action = components['schemas']['AutomationAction'];
type Template = components['schemas']['MessageTemplate'];

/** What a run acts on: its thread (absent for contact.created) and the thread's or event's contact. */
export interface RunTarget {
  threadId: string | null;
  contactId: string;
  channelId: string | null;
  /**
   * The thread as the run's first statement read and locked it, while nothing in the run's
   * transaction has written it since: the first action takes it (and empties it), so a change of
   * the thread reads it no second time; any later action reads the thread itself.
   */
  locked?: VersionedThread | undefined;
}

/** The run's locked thread, for the action about to run, and never again (that action may write it). */
function takeLocked(target: RunTarget): VersionedThread | undefined {
  const { locked } = target;
  target.locked = undefined;
  return locked;
}

/** Why an action did nothing on purpose; the run still succeeds. */
class Skipped extends Error {}

/** The messages (text, template, NPS question) automations may send to one thread in an hour. */
export const MAX_AUTOMATION_MESSAGES = 10;

export const RATE_LIMITED = 'rate_limited';

/** What a run's actions may still do: the messages automations may still send to its thread this hour (spent as they go). */
export interface RunBudget {
  messages: number;
}

const SENDS: ReadonlySet<Action['type']> = new Set(['send_message', 'send_template', 'request_nps']);

/** Applies one action within the budget: a message beyond it is skipped `rate_limited`, one sent spends it. */
async function applyWithin(
  trx: Db,
  workspaceId: string,
  target: RunTarget,
  actor: AutomationActor,
  action: Action,
  budget: RunBudget,
  read: VersionedThread | undefined,
): Promise<void> {
  if (!SENDS.has(action.type)) return apply(trx, workspaceId, target, actor, action, read);
  if (budget.messages <= 0) throw new Skipped(RATE_LIMITED);
  await apply(trx, workspaceId, target, actor, action);
  budget.messages--;
}

const sameLabel = (a: string, b: string): boolean => foldCase(a) === foldCase(b);

/** A failed action's reason: the error code and message the API would have answered, or the database's. */
function failure(err: unknown): string {
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  const code = (err as { code?: string }).code;
  if (code === '23503') return 'invalid_reference: a stage or agent it names no longer exists';
  if (code === '23505') return 'conflict: the contact has another open thread on this channel';
  return `internal_error: ${(err as Error).message ?? String(err)}`;
}

async function changeTheThread(
  trx: Db,
  workspaceId: string,
  target: RunTarget,
  actor: AutomationActor,
  change: ThreadChange | ((current: ThreadRow) => ThreadChange),
  read?: VersionedThread,
): Promise<void> {
  if (!target.threadId) throw new ApiError(422, 'invalid_reference', 'The trigger has no thread.');
  // Its thread.updated goes with the run's next statement (the run's own record follows every action).
  const row = await changeThread(trx, workspaceId, target.threadId, change, { actor, reason: null }, { read, withNext: true });
  if (!row) throw new ApiError(404, 'not_found', 'The thread no longer exists.');
}

/**
 * A labels action applied to a list of labels. A label blank once trimmed adds nothing (the contract
 * refuses one at create; an automation stored before it did may hold one); more than MAX_LABELS is
 * the action's 422 `limit_reached`, as a merge's.
 */
function editLabels(action: components['schemas']['LabelsAction'], current: readonly string[]): string[] {
  if (action.type === 'remove_labels') return current.filter((label) => !action.labels.some((gone) => sameLabel(gone, label.trim())));
  const labels = normalizeLabels([...current, ...action.labels]).filter((label) => label !== '');
  if (labels.length > MAX_LABELS) {
    throw new ApiError(422, 'limit_reached', `The ${action.target} would have ${labels.length} labels; at most ${MAX_LABELS}.`);
  }
  return labels;
}

type ThreadFieldAction = Extract<Action, { type: 'assign_agent' | 'unassign' | 'move_stage' | 'set_status' | 'add_labels' | 'remove_labels' }>;

/** Whether the action changes only the thread's own fields (one changeThread can apply several such actions together). */
function isThreadField(action: Action): action is ThreadFieldAction {
  switch (action.type) {
    case 'assign_agent':
    case 'unassign':
    case 'move_stage':
    case 'set_status':
      return true;
    case 'add_labels':
    case 'remove_labels':
      return action.target === 'thread';
    default:
      return false;
  }
}

/**
 * `actions` (thread fields only) applied in order to the thread `current`, as one change: a later
 * action on a field sees (and overrides) what an earlier one made of it.
 */
function combinedChange(actions: readonly ThreadFieldAction[], current: ThreadRow): ThreadChange {
  const change: ThreadChange = {};
  let labels: readonly string[] = current.labels;
  for (const action of actions) {
    switch (action.type) {
      case 'assign_agent':
        change.agentId = action.agentId;
        break;
      case 'unassign':
        change.agentId = null;
        break;
      case 'move_stage':
        change.stageId = action.stageId;
        break;
      case 'set_status':
        change.status = action.status;
        break;
      default:
        labels = editLabels(action, labels);
        change.labels = labels;
    }
  }
  return change;
}

async function changeLabels(
  trx: Db,
  workspaceId: string,
  target: RunTarget,
  actor: AutomationActor,
  action: components['schemas']['LabelsAction'],
  read: VersionedThread | undefined,
) {
  const edit = (current: readonly string[]): string[] => editLabels(action, current);
  if (action.target === 'contact') {
    const contact = await lockContact(trx, workspaceId, target.contactId);
    if (!contact) throw new ApiError(404, 'not_found', 'The contact no longer exists.');
    await updateContact(trx, workspaceId, target.contactId, { labels: edit(contact.labels) }, actor);
    return;
  }
  await changeTheThread(trx, workspaceId, target, actor, (thread) => ({ labels: edit(thread.labels) }), read);
}

async function send(trx: Db, workspaceId: string, target: RunTarget, actor: AutomationActor, content: { content: string } | { template: Template }) {
  if (!target.channelId) throw new ApiError(422, 'invalid_reference', 'The trigger has no thread to send on.');
  await sendMessage(trx, workspaceId, { contactId: target.contactId, channelId: target.channelId, ...content }, actor);
}

/** `read`: the thread as the run holds it, unchanged since (a thread change plans from it). */
async function apply(trx: Db, workspaceId: string, target: RunTarget, actor: AutomationActor, action: Action, read?: VersionedThread): Promise<void> {
  switch (action.type) {
    case 'assign_agent':
      return changeTheThread(trx, workspaceId, target, actor, { agentId: action.agentId }, read);
    case 'unassign':
      return changeTheThread(trx, workspaceId, target, actor, { agentId: null }, read);
    case 'move_stage':
      return changeTheThread(trx, workspaceId, target, actor, { stageId: action.stageId }, read);
    case 'set_status':
      return changeTheThread(trx, workspaceId, target, actor, { status: action.status }, read);
    case 'assign_round_robin':
      if (!target.threadId || !(await assignRoundRobin(trx, workspaceId, target.threadId, actor, null))) {
        throw new ApiError(404, 'not_found', 'The thread no longer exists.');
      }
      return;
    case 'add_labels':
    case 'remove_labels':
      return changeLabels(trx, workspaceId, target, actor, action, read);
    case 'set_attribute':
      try {
        if (!(await updateContact(trx, workspaceId, target.contactId, { attributes: { [action.key]: action.value } }, actor))) {
          throw new ApiError(404, 'not_found', 'The contact no longer exists.');
        }
      } catch (err) {
        // The one rule a valid attribute can break here: the contact's attributes are full.
        if (err instanceof ApiError && err.code === 'validation_error') {
          throw new ApiError(422, 'limit_reached', `The contact has ${MAX_ATTRIBUTES} attributes, its most; this one would be one more.`);
        }
        throw err;
      }
      return;
    case 'send_message':
      try {
        return await send(trx, workspaceId, target, actor, { content: action.content });
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 'outside_messaging_window')) throw err;
        if (!action.fallbackTemplate) throw new Skipped('outside_messaging_window');
        try {
          return await send(trx, workspaceId, target, actor, { template: action.fallbackTemplate });
        } catch (fallback) {
          // Instagram has no templates: outside the window, nothing can be sent there.
          if (fallback instanceof ApiError && fallback.code === 'template_not_supported') throw new Skipped('outside_messaging_window');
          throw fallback;
        }
      }
    case 'send_template':
      return send(trx, workspaceId, target, actor, {
        template: { name: action.name, language: action.language, ...(action.parameters && { parameters: action.parameters }) },
      });
    case 'request_nps':
      if (!target.threadId) throw new ApiError(422, 'invalid_reference', 'The trigger has no thread.');
      try {
        await requestNps(trx, workspaceId, target.threadId, actor);
        return;
      } catch (err) {
        // Asked already (or answered), or no way to ask now or ever (no phone nor BSUID, the contact
        // erased): nothing to do, as send_message outside its window.
        if (err instanceof ApiError && ['conflict', 'outside_messaging_window', 'contact_unreachable', 'invalid_reference'].includes(err.code)) {
          throw new Skipped(err.code);
        }
        throw err;
      }
    case 'stop':
      return;
    default:
      return unknownAction(action);
  }
}

/** Every action type of the contract is handled above: a new one fails the type check here. */
function unknownAction(action: never): never {
  throw new Error(`no such action: ${JSON.stringify(action)}`);
}

/**
 * Thrown by applyActions without savepoints when an action did not succeed: the run's transaction
 * must roll back and run again with them (engine.ts), so that the action is undone alone.
 */
export class ActionsNeedSavepoints extends Error {}

/**
 * Applies `actions` in order in the run's transaction `trx`; what each did. Consecutive actions on
 * the thread's fields are tried as one change of the thread. With `savepoints`, each action (or
 * such group) is tried on its own (a savepoint before it; one that fails or is skipped is rolled
 * back alone, and a group that fails is tried again one action at a time). Without, the common case of actions that all succeed costs no round trip of savepoints
 * (two an action): the first that does not succeed throws ActionsNeedSavepoints instead.
 */
export async function applyActions(
  trx: Db,
  workspaceId: string,
  target: RunTarget,
  actor: AutomationActor,
  actions: readonly Action[],
  options: { savepoints: boolean; budget: RunBudget },
): Promise<AutomationRunAction[]> {
  const done: AutomationRunAction[] = [];
  // A group that failed as one change (under savepoints) is applied again one action at a time, up to this index.
  let aloneUntil = -1;
  for (let i = 0; i < actions.length; i++) {
    const action = actions[i]!;
    // The run of thread-field actions that starts here, applied as one change of the thread.
    let group = 0;
    if (i > aloneUntil) while (i + group < actions.length && isThreadField(actions[i + group]!)) group++;
    const read = takeLocked(target);
    if (group > 1) {
      const grouped = actions.slice(i, i + group) as ThreadFieldAction[];
      const together = () => changeTheThread(trx, workspaceId, target, actor, (current) => combinedChange(grouped, current), read);
      if (!options.savepoints) {
        try {
          await together();
        } catch (err) {
          throw new ActionsNeedSavepoints(`action ${action.type} did not succeed`, { cause: err });
        }
      } else {
        await sql`savepoint automation_action`.execute(trx);
        try {
          await together();
          await sql`release savepoint automation_action`.execute(trx);
        } catch {
          await sql`rollback to savepoint automation_action`.execute(trx);
          aloneUntil = i + group - 1;
          i--;
          continue;
        }
      }
      for (const one of grouped) done.push({ type: one.type, status: 'succeeded', reason: null });
      i += group - 1;
      continue;
    }
    if (!options.savepoints) {
      try {
        await applyWithin(trx, workspaceId, target, actor, action, options.budget, read);
      } catch (err) {
        throw new ActionsNeedSavepoints(`action ${action.type} did not succeed`, { cause: err });
      }
      done.push({ type: action.type, status: 'succeeded', reason: null });
      continue;
    }
    await sql`savepoint automation_action`.execute(trx);
    try {
      await applyWithin(trx, workspaceId, target, actor, action, options.budget, read);
      await sql`release savepoint automation_action`.execute(trx);
      done.push({ type: action.type, status: 'succeeded', reason: null });
    } catch (err) {
      await sql`rollback to savepoint automation_action`.execute(trx);
      done.push(
        err instanceof Skipped ? { type: action.type, status: 'skipped', reason: err.message } : { type: action.type, status: 'failed', reason: failure(err) },
      );
    }
  }
  return done;
}
