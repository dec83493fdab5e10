// The conditions of an automation, evaluated against an event's context: pure, no I/O. Each
// condition is explained with the value it saw, which is what the dry run answers. Text compares
// ignoring case and accents ("NÃO" contains "nao"), labels ignoring case as they are kept (both
// folds are src/text.ts's), ids ignoring case; a comparison with a missing value or one of another
// type is false, and its negation true.
import type { components } from '../../generated/api.js';
import { foldCase, foldText } from '../text.js';
import { ATTRIBUTE_PREFIX, fieldRule, type Condition, type Operator } from './fields.js';

/** The text conditions' fold, which is src/text.ts's. */
export { foldText };

export type ConditionResult = components['schemas']['AutomationConditionResult'];
export type Conditions = components['schemas']['AutomationConditions'];
export type AttributeValue = string | number | boolean;

/** What the event brings: the objects its trigger has, and whether the workspace is in its business hours. */
export interface ConditionContext {
  thread?: { status: string; stageId: string; agentId: string | null; channelId: string; labels: readonly string[] };
  channel?: { type: string };
  contact?: { labels: readonly string[]; attributes: Readonly<Record<string, AttributeValue>> };
  message?: { content: string | null };
  nps?: { score: number | null };
  businessHours: boolean;
}

export interface Evaluation {
  matched: boolean;
  conditions: ConditionResult[];
}

/** The value a field has in the context; null when the object or the value is missing. */
export function actualValue(field: string, context: ConditionContext): unknown {
  if (field.startsWith(ATTRIBUTE_PREFIX)) {
    const attributes = context.contact?.attributes;
    const key = field.slice(ATTRIBUTE_PREFIX.length);
    return attributes && Object.hasOwn(attributes, key) ? attributes[key] : null;
  }
  switch (field) {
    case 'thread.status':
      return context.thread?.status ?? null;
    case 'thread.stageId':
      return context.thread?.stageId ?? null;
    case 'thread.channelId':
      return context.thread?.channelId ?? null;
    case 'thread.agentId':
      return context.thread?.agentId ?? null;
    case 'thread.labels':
      return context.thread ? [...context.thread.labels] : null;
    case 'channel.type':
      return context.channel?.type ?? null;
    case 'contact.labels':
      return context.contact ? [...context.contact.labels] : null;
    case 'message.content':
      return context.message?.content ?? null;
    case 'nps.score':
      return context.nps?.score ?? null;
    case 'time.businessHours':
      return context.businessHours;
    default:
      return null;
  }
}

const isText = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Whether `actual` equals one value, by the field's way of comparing. */
function same(comparison: string, actual: unknown, value: unknown): boolean {
  if (actual === null || actual === undefined) return false;
  switch (comparison) {
    case 'id':
      return isText(actual) && isText(value) && actual.toLowerCase() === value.toLowerCase();
    case 'text':
    case 'attribute':
      if (isText(value)) return isText(actual) && foldText(actual) === foldText(value);
      return actual === value;
    case 'labels':
      return Array.isArray(actual) && isText(value) && actual.some((label) => isText(label) && foldCase(label) === foldCase(value));
    default:
      return actual === value;
  }
}

/** The positive form of each operator; the negated ones answer its opposite. */
const NEGATION: Partial<Record<Operator, Operator>> = { not_equals: 'equals', not_in: 'in', not_contains: 'contains', is_not_set: 'is_set' };

function holds(comparison: string, operator: Operator, actual: unknown, value: unknown): boolean {
  const positive = NEGATION[operator];
  if (positive) return !holds(comparison, positive, actual, value);
  switch (operator) {
    case 'equals':
      return same(comparison, actual, value);
    case 'in':
      return Array.isArray(value) && value.some((one) => same(comparison, actual, one));
    case 'contains':
      if (comparison === 'labels') return same(comparison, actual, value);
      return isText(actual) && isText(value) && foldText(actual).includes(foldText(value));
    case 'starts_with':
      return isText(actual) && isText(value) && foldText(actual).startsWith(foldText(value));
    case 'gt':
      return isNumber(actual) && isNumber(value) && actual > value;
    case 'gte':
      return isNumber(actual) && isNumber(value) && actual >= value;
    case 'lt':
      return isNumber(actual) && isNumber(value) && actual < value;
    case 'lte':
      return isNumber(actual) && isNumber(value) && actual <= value;
    case 'is_set':
      return actual !== null && actual !== undefined && (!Array.isArray(actual) || actual.length > 0);
    default:
      return false;
  }
}

/** One condition against the context, explained. A field the table does not know is false (validate.ts refuses it first). */
export function evaluateCondition(condition: Condition, context: ConditionContext): ConditionResult {
  const rule = fieldRule(condition.field);
  const actual = actualValue(condition.field, context);
  const result = rule !== undefined && holds(rule.comparison, condition.operator, actual, condition.value);
  return {
    field: condition.field,
    operator: condition.operator,
    ...(condition.value !== undefined && { value: condition.value }),
    actual,
    result,
  };
}

/**
 * `all` (every one holds) and `any` (at least one does), both when both are given; none given:
 * matched. Every condition is evaluated, so each is explained.
 */
export function evaluateConditions(conditions: Conditions, context: ConditionContext): Evaluation {
  const all = (conditions.all ?? []).map((c) => evaluateCondition(c, context));
  const any = (conditions.any ?? []).map((c) => evaluateCondition(c, context));
  const matched = all.every((r) => r.result) && (conditions.any === undefined || any.some((r) => r.result));
  return { matched, conditions: [...all, ...any] };
}
