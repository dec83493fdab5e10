// What a condition may say: for each field, its operators and the value each takes, and the object
// of the event's context it reads (which not every trigger has). The one table behind both the
// checks at create (validate.ts) and the evaluation (conditions.ts); openapi.yaml's
// AutomationCondition and the README show it to people.
import type { components } from '../../generated/api.js';

export type Operator = components['schemas']['AutomationOperator'];
export type Condition = components['schemas']['AutomationCondition'];
export type Trigger = components['schemas']['AutomationTrigger'];
export type TriggerEvent = Trigger['event'];

/** The objects of an event's context a condition or action may need. */
export type ContextObject = 'thread' | 'message' | 'nps' | 'sla';

/**
 * What a value must be: none (`is_set`), one of a kind, or a list (1..100) of one kind. `id`: a
 * UUID the workspace must have (422 when not); `score`: an integer 0..10.
 */
export type ValueKind = 'text' | 'number' | 'boolean' | 'scalar' | 'id' | 'score' | 'label';
export interface ValueOf {
  shape: 'one' | 'list';
  kind: ValueKind;
  choices?: readonly string[];
}
export type ValueRule = { shape: 'none' } | ValueOf;

/** How a field's value compares: as text (case and accents ignored), a label list, an id, a number... */
export type Comparison = 'text' | 'labels' | 'id' | 'exact' | 'attribute';

export interface FieldRule {
  /** The object of the context the field reads; absent: every trigger has it. */
  needs?: ContextObject;
  comparison: Comparison;
  operators: Partial<Record<Operator, ValueRule>>;
}

const none: ValueRule = { shape: 'none' };
const one = (kind: ValueKind, choices?: readonly string[]): ValueRule => ({ shape: 'one', kind, ...(choices && { choices }) });
const list = (kind: ValueKind, choices?: readonly string[]): ValueRule => ({ shape: 'list', kind, ...(choices && { choices }) });

const choiceField = (needs: ContextObject, choices: readonly string[]): FieldRule => ({
  needs,
  comparison: 'exact',
  operators: { equals: one('text', choices), not_equals: one('text', choices), in: list('text', choices), not_in: list('text', choices) },
});
const idField = (optional: boolean): FieldRule => ({
  needs: 'thread',
  comparison: 'id',
  operators: {
    equals: one('id'),
    not_equals: one('id'),
    in: list('id'),
    not_in: list('id'),
    ...(optional && { is_set: none, is_not_set: none }),
  },
});
const labelsField = (needs: ContextObject | undefined): FieldRule => ({
  ...(needs && { needs }),
  comparison: 'labels',
  operators: { contains: one('label'), not_contains: one('label'), in: list('label'), not_in: list('label'), is_set: none, is_not_set: none },
});
const numeric = (kind: 'number'): Partial<Record<Operator, ValueRule>> => ({ gt: one(kind), gte: one(kind), lt: one(kind), lte: one(kind) });

/** The rule of each field but `contact.attributes.<key>`, which ATTRIBUTE covers. */
export const FIELDS: Readonly<Record<string, FieldRule>> = {
  'thread.status': choiceField('thread', ['open', 'closed']),
  'thread.stageId': idField(false),
  'thread.channelId': idField(false),
  'thread.agentId': idField(true),
  'thread.labels': labelsField('thread'),
  'channel.type': choiceField('thread', ['whatsapp', 'instagram']),
  'contact.labels': labelsField(undefined),
  'message.content': {
    needs: 'message',
    comparison: 'text',
    operators: {
      equals: one('text'),
      not_equals: one('text'),
      in: list('text'),
      not_in: list('text'),
      contains: one('text'),
      not_contains: one('text'),
      starts_with: one('text'),
      is_set: none,
      is_not_set: none,
    },
  },
  // The id of the button or list row a customer tapped (interactive.reply.id), compared exactly.
  'message.replyId': {
    needs: 'message',
    comparison: 'exact',
    operators: { equals: one('text'), not_equals: one('text'), in: list('text'), not_in: list('text'), is_set: none, is_not_set: none },
  },
  'nps.score': {
    needs: 'nps',
    comparison: 'exact',
    operators: { equals: one('score'), not_equals: one('score'), in: list('score'), not_in: list('score'), ...numeric('number') },
  },
  'time.businessHours': { comparison: 'exact', operators: { equals: one('boolean'), not_equals: one('boolean') } },
  'sla.metric': choiceField('sla', ['firstResponse', 'nextResponse', 'resolution']),
};

export const ATTRIBUTE_PREFIX = 'contact.attributes.';

export const ATTRIBUTE: FieldRule = {
  comparison: 'attribute',
  operators: {
    equals: one('scalar'),
    not_equals: one('scalar'),
    in: list('scalar'),
    not_in: list('scalar'),
    contains: one('text'),
    not_contains: one('text'),
    starts_with: one('text'),
    ...numeric('number'),
    is_set: none,
    is_not_set: none,
  },
};

/** The rule of a field as the contract's pattern admits it; undefined for anything else. */
export function fieldRule(field: string): FieldRule | undefined {
  if (field.startsWith(ATTRIBUTE_PREFIX)) return /^[a-z][a-z0-9_]{0,39}$/.test(field.slice(ATTRIBUTE_PREFIX.length)) ? ATTRIBUTE : undefined;
  return Object.hasOwn(FIELDS, field) ? FIELDS[field] : undefined;
}

/** The objects each trigger's context has (the contact and the time, every one). */
export const TRIGGER_OBJECTS: Readonly<Record<TriggerEvent, readonly ContextObject[]>> = {
  'contact.created': [],
  'thread.created': ['thread'],
  'thread.updated': ['thread'],
  'thread.idle': ['thread'],
  'message.received': ['thread', 'message'],
  'message.sent': ['thread', 'message'],
  'nps.answered': ['thread', 'nps'],
  'sla.warning': ['thread', 'sla'],
  'sla.breached': ['thread', 'sla'],
};

/** What a missing object is called in a message: "a message trigger", ... */
export const NEEDS_TRIGGER: Readonly<Record<ContextObject, string>> = {
  thread: 'a trigger with a thread (any but contact.created)',
  message: 'a message trigger (message.received or message.sent)',
  nps: 'the nps.answered trigger',
  sla: 'an SLA trigger (sla.warning or sla.breached)',
};
