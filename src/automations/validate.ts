// The checks of an automation before it is stored (create, and the result of a PATCH), beyond
// what the contract's schemas say: each condition against its field's row of the table in
// fields.ts and against its trigger, each action against its trigger (400 validation_error, every
// problem named), then the stages, agents and channels it names (422 invalid_reference).
import type { components } from '../../generated/api.js';
import type { Db } from '../db/database.js';
import { MAX_DEFINITION_BYTES, referencedNames, type ReferenceKind } from '../db/automations.js';
import { ApiError, type ErrorDetail } from '../errors.js';
import { codePointLength } from '../text.js';
import { fieldRule, NEEDS_TRIGGER, TRIGGER_OBJECTS, type Condition, type ContextObject, type ValueOf } from './fields.js';

export type Definition = Pick<components['schemas']['Automation'], 'trigger' | 'conditions' | 'actions'>;
type Action = components['schemas']['AutomationAction'];

export const MAX_AUTOMATIONS = 100;
export const MAX_CONDITIONS = 20;

/** The size the bound measures: the UTF-8 bytes of `{"trigger":...,"conditions":...,"actions":...}` without spaces. */
export const definitionBytes = (definition: Definition): number =>
  Buffer.byteLength(JSON.stringify({ trigger: definition.trigger, conditions: definition.conditions, actions: definition.actions }));

const sizeRule = (bytes: number): string =>
  `An automation's trigger, conditions and actions take at most 32 KiB (${MAX_DEFINITION_BYTES} bytes of UTF-8 JSON) together; this one takes ${bytes}`;

/** The 400 of an automation to store over the bound; undefined within it. */
function tooLarge(definition: Definition): ApiError | undefined {
  const bytes = definitionBytes(definition);
  if (bytes <= MAX_DEFINITION_BYTES) return undefined;
  return new ApiError(400, 'validation_error', `${sizeRule(bytes)}.`, [
    { path: '/body', message: `must be at most ${MAX_DEFINITION_BYTES} bytes as UTF-8 JSON of trigger, conditions and actions, not ${bytes}` },
  ]);
}

/** Throws the 422 of an automation stored over the bound before it existed: it neither runs nor is tested until changed to fit. */
export function assertWithinBound(definition: Definition): void {
  const bytes = definitionBytes(definition);
  if (bytes > MAX_DEFINITION_BYTES) throw new ApiError(422, 'limit_reached', `${sizeRule(bytes)}: change it to fit before testing it.`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_LABEL = 50;

const describe = (value: unknown): string => (Array.isArray(value) ? 'a list' : value === null ? 'null' : `a ${typeof value}`);

/** Why one value does not fit its kind; undefined when it does. */
function kindProblem(rule: ValueOf, value: unknown, inList: boolean): string | undefined {
  switch (rule.kind) {
    case 'text':
      if (typeof value !== 'string') return `must be a string, not ${describe(value)}`;
      if (rule.choices && !rule.choices.includes(value)) return `must be one of ${rule.choices.join(', ')}`;
      return undefined;
    case 'label':
      if (typeof value !== 'string') return `must be a label (a string), not ${describe(value)}`;
      if (value.trim() === '' || codePointLength(value) > MAX_LABEL) return `must be a label of 1 to ${MAX_LABEL} characters`;
      return undefined;
    case 'number':
      return typeof value === 'number' ? undefined : `must be a number, not ${describe(value)}`;
    case 'boolean':
      return typeof value === 'boolean' ? undefined : `must be true or false, not ${describe(value)}`;
    case 'scalar':
      if (inList) return typeof value === 'string' || typeof value === 'number' ? undefined : `must be a string or a number, not ${describe(value)}`;
      return ['string', 'number', 'boolean'].includes(typeof value) ? undefined : `must be a string, a number or a boolean, not ${describe(value)}`;
    case 'id':
      return typeof value === 'string' && UUID.test(value) ? undefined : 'must be an id (a UUID)';
    case 'score':
      return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 10 ? undefined : 'must be an integer from 0 to 10';
  }
}

function conditionProblems(condition: Condition, path: string, objects: readonly ContextObject[], event: string): ErrorDetail[] {
  const rule = fieldRule(condition.field);
  if (!rule) return [{ path: `${path}/field`, message: 'is not a field a condition can test' }];
  const problems: ErrorDetail[] = [];
  if (rule.needs && !objects.includes(rule.needs)) {
    problems.push({ path: `${path}/field`, message: `${condition.field} needs ${NEEDS_TRIGGER[rule.needs]}; the trigger is ${event}` });
  }
  const valueRule = rule.operators[condition.operator];
  if (!valueRule) {
    const allowed = Object.keys(rule.operators).join(', ');
    return [...problems, { path: `${path}/operator`, message: `${condition.operator} does not apply to ${condition.field}; use one of ${allowed}` }];
  }
  const { value } = condition;
  if (valueRule.shape === 'none') {
    if (value !== undefined) problems.push({ path: `${path}/value`, message: `must be left out with ${condition.operator}` });
    return problems;
  }
  if (value === undefined) return [...problems, { path: `${path}/value`, message: `is required with ${condition.operator}` }];
  if (valueRule.shape === 'list') {
    if (!Array.isArray(value)) return [...problems, { path: `${path}/value`, message: `must be a list with ${condition.operator}, not ${describe(value)}` }];
    const one = { ...valueRule, shape: 'one' as const };
    value.forEach((item, i) => {
      const problem = kindProblem(one, item, true);
      if (problem) problems.push({ path: `${path}/value/${i}`, message: problem });
    });
    return problems;
  }
  if (Array.isArray(value))
    return [...problems, { path: `${path}/value`, message: `must be a single value with ${condition.operator}, not a list (use in or not_in)` }];
  const problem = kindProblem(valueRule, value, false);
  return problem ? [...problems, { path: `${path}/value`, message: problem }] : problems;
}

/** Whether an action changes or writes on the thread (every one but the contact's labels and attributes, and stop). */
function needsThread(action: Action): boolean {
  if (action.type === 'add_labels' || action.type === 'remove_labels') return action.target === 'thread';
  return action.type !== 'set_attribute' && action.type !== 'stop';
}

/** Every problem of the definition as `validation_error` details (at most 20 are answered); empty when it is sound. */
export function definitionProblems(definition: Definition): ErrorDetail[] {
  const { trigger, conditions, actions } = definition;
  const objects = TRIGGER_OBJECTS[trigger.event];
  const problems: ErrorDetail[] = [];
  const count = (conditions.all?.length ?? 0) + (conditions.any?.length ?? 0);
  if (count > MAX_CONDITIONS)
    problems.push({ path: '/body/conditions', message: `must hold at most ${MAX_CONDITIONS} conditions in all and any together, not ${count}` });
  for (const group of ['all', 'any'] as const) {
    conditions[group]?.forEach((condition, i) => problems.push(...conditionProblems(condition, `/body/conditions/${group}/${i}`, objects, trigger.event)));
  }
  actions.forEach((action, i) => {
    if (needsThread(action) && !objects.includes('thread')) {
      problems.push({ path: `/body/actions/${i}/type`, message: `${action.type} acts on a thread, which the trigger ${trigger.event} does not have` });
    }
  });
  return problems.slice(0, 20);
}

/** Throws the 400 of a definition over the size bound, or with problems. */
export function assertSound(definition: Definition): void {
  const large = tooLarge(definition);
  if (large) throw large;
  const problems = definitionProblems(definition);
  if (problems.length > 0)
    throw new ApiError(400, 'validation_error', "The automation's conditions or actions do not fit its fields or its trigger.", problems);
}

interface Reference {
  path: string;
  kind: ReferenceKind;
  id: string;
}

const CONDITION_REFERENCES: Readonly<Record<string, ReferenceKind>> = { 'thread.stageId': 'stage', 'thread.agentId': 'agent', 'thread.channelId': 'channel' };

/** The stages, agents and channels a (sound) definition names, with where. */
export function referencesOf(definition: Definition): Reference[] {
  const found: Reference[] = [];
  for (const group of ['all', 'any'] as const) {
    definition.conditions[group]?.forEach((condition, i) => {
      const kind = CONDITION_REFERENCES[condition.field];
      const path = `/body/conditions/${group}/${i}/value`;
      if (!kind || condition.value === undefined) return;
      if (Array.isArray(condition.value)) condition.value.forEach((id, j) => found.push({ path: `${path}/${j}`, kind, id: String(id) }));
      else found.push({ path, kind, id: String(condition.value) });
    });
  }
  definition.actions.forEach((action, i) => {
    if (action.type === 'assign_agent') found.push({ path: `/body/actions/${i}/agentId`, kind: 'agent', id: action.agentId });
    if (action.type === 'move_stage') found.push({ path: `/body/actions/${i}/stageId`, kind: 'stage', id: action.stageId });
  });
  return found;
}

/** Throws 422 invalid_reference naming each stage, agent or channel the workspace does not have. */
export async function assertReferences(db: Db, workspaceId: string, definition: Definition): Promise<void> {
  const references = referencesOf(definition);
  if (references.length === 0) return;
  const ids = { stage: [] as string[], agent: [] as string[], channel: [] as string[] };
  for (const reference of references) ids[reference.kind].push(reference.id.toLowerCase());
  const existing = await referencedNames(db, workspaceId, ids);
  const missing = references.filter((reference) => !existing.has(`${reference.kind}:${reference.id.toLowerCase()}`));
  if (missing.length === 0) return;
  const kinds = [...new Set(missing.map((reference) => reference.kind))];
  const message = kinds.length === 1 ? `The ${kinds[0]} does not exist.` : `The ${kinds.join(', ')} do not exist.`;
  throw new ApiError(
    422,
    'invalid_reference',
    message,
    missing.slice(0, 20).map((reference) => ({ path: reference.path, message: `no ${reference.kind} with this id` })),
  );
}
