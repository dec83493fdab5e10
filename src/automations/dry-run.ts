// What each action of an automation would do to a thread now, in words (the dry run's `wouldDo`):
// pure, from the thread's context and the names of the stages and agents the actions name.
import type { components } from '../../generated/api.js';
import type { ConditionContext } from './conditions.js';

type Action = components['schemas']['AutomationAction'];

/** Names by `kind:id` (id lowercase), as referencedNames answers them. */
export type Names = ReadonlyMap<string, string>;

const quoted = (labels: readonly string[]): string => labels.map((label) => `"${label}"`).join(', ');

/** The sentence of one action. */
export function wouldDo(action: Action, context: ConditionContext, names: Names): string {
  const thread = context.thread;
  const name = (kind: string, id: string | null | undefined): string => (id ? (names.get(`${kind}:${id.toLowerCase()}`) ?? id) : 'none');
  switch (action.type) {
    case 'assign_agent':
      return thread?.agentId?.toLowerCase() === action.agentId.toLowerCase()
        ? `nothing: the thread is already assigned to ${name('agent', action.agentId)}`
        : `assign the thread to ${name('agent', action.agentId)}`;
    case 'assign_round_robin':
      return 'assign the thread to the available person whose last assignment is the oldest (none available: unassign it)';
    case 'unassign':
      return thread?.agentId ? `unassign the thread from ${name('agent', thread.agentId)}` : 'nothing: the thread is not assigned';
    case 'move_stage':
      return thread?.stageId.toLowerCase() === action.stageId.toLowerCase()
        ? `nothing: the thread is already in stage ${name('stage', action.stageId)}`
        : `move the thread from stage ${name('stage', thread?.stageId)} to stage ${name('stage', action.stageId)}`;
    case 'set_status':
      if (thread?.status === action.status) return `nothing: the thread is already ${action.status}`;
      return action.status === 'closed' ? 'close the thread' : 'reopen the thread';
    case 'add_labels':
    case 'remove_labels': {
      const verb = action.type === 'add_labels' ? 'add the labels' : 'remove the labels';
      return `${verb} ${quoted(action.labels)} ${action.type === 'add_labels' ? 'to' : 'from'} the ${action.target}`;
    }
    case 'set_attribute':
      return action.value === null
        ? `remove the contact's attribute ${action.key}`
        : `set the contact's attribute ${action.key} to ${JSON.stringify(action.value)}`;
    case 'send_message':
      return action.fallbackTemplate
        ? `send the message "${action.content}" on the thread (outside the 24-hour window, the template ${action.fallbackTemplate.name} instead)`
        : `send the message "${action.content}" on the thread (outside the 24-hour window: skipped)`;
    case 'send_template':
      return `send the template ${action.name} (${action.language}) on the thread`;
    case 'request_nps':
      if (context.nps?.score !== null && context.nps?.score !== undefined) return `nothing: the thread already has its NPS answer (${context.nps.score})`;
      return 'ask the NPS question on the thread (nothing if it is asked and still pending)';
    case 'stop':
      return 'stop: no later automation runs for this event';
  }
}
