// The conditions of an automation, evaluated against an event's context: pure, no I/O. Each
// condition is compiled once (its values folded, lists made sets; prepared.ts keeps them per automation version), so an
// evaluation costs a lookup per condition whatever the size of its lists; runs stop at the first
// deciding condition, the dry run explains each with the value it saw. Text compares ignoring case
// and accents ("NÃO" contains "nao"), labels ignoring case as they are kept (both folds are
// src/text.ts's), ids ignoring case; a comparison with a missing value or one of another type is
// false, and its negation true.
import type { components } from '../../generated/api.js';
import { foldCase, foldText } from '../text.js';
import { ATTRIBUTE_PREFIX, fieldRule, type Comparison, type Condition, type Operator } from './fields.js';

export type ConditionResult = components['schemas']['AutomationConditionResult'];
export type Conditions = components['schemas']['AutomationConditions'];
export type AttributeValue = components['schemas']['AttributeValue'];

/** What the event brings: the objects its trigger has, and whether the workspace is in its business hours. */
export interface ConditionContext {
  thread?: { status: string; stageId: string; agentId: string | null; channelId: string; labels: readonly string[] };
  channel?: { type: string };
  contact?: { labels: readonly string[]; attributes: Readonly<Record<string, AttributeValue>> };
  message?: { content: string | null; replyId?: string | null };
  nps?: { score: number | null };
  /** The clock an sla.warning or sla.breached is about. */
  sla?: { metric: string };
  businessHours: boolean;
}

export interface Evaluation {
  matched: boolean;
  conditions: ConditionResult[];
}

/** The text conditions' fold, which is src/text.ts's. */
export { foldText };

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
    case 'message.replyId':
      return context.message?.replyId ?? null;
    case 'nps.score':
      return context.nps?.score ?? null;
    case 'sla.metric':
      return context.sla?.metric ?? null;
    case 'time.businessHours':
      return context.businessHours;
    default:
      return null;
  }
}

const isText = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Recent folds of the texts conditions read (a message's content is read by every condition on it): each folded once. */
const recentFolds = new Map<string, string>();
const RECENT_FOLDS = 64;

function foldActual(text: string): string {
  let folded = recentFolds.get(text);
  if (folded === undefined) {
    if (recentFolds.size >= RECENT_FOLDS) recentFolds.clear();
    folded = foldText(text);
    recentFolds.set(text, folded);
  }
  return folded;
}

/** Whether the field's actual value is what a condition expects; its value prepared (folded, lower-cased) once. */
type Test = (actual: unknown) => boolean;

const never: Test = () => false;

/** A text value as it compares for the field: folded (text, attributes), lower-cased (ids, labels) or as it is. */
export function valueKey(comparison: Comparison, value: string): string {
  if (comparison === 'text' || comparison === 'attribute') return foldText(value);
  if (comparison === 'labels') return foldCase(value);
  return comparison === 'id' ? value.toLowerCase() : value;
}

/** How a compile turns text values into keys: valueKey, or nothing for values folded when saved (foldConditions). */
type KeyOf = (value: string) => string;

/** The test of `actual` equal to one of `values`, by the field's way of comparing. */
function equalsOneOf(comparison: Comparison, values: readonly unknown[], key: KeyOf): Test {
  switch (comparison) {
    case 'id': {
      const ids = new Set(values.filter(isText).map(key));
      return (actual) => isText(actual) && ids.has(actual.toLowerCase());
    }
    case 'text':
    case 'attribute': {
      const texts = new Set(values.filter(isText).map(key));
      const others = new Set(values.filter((v) => !isText(v)));
      return (actual) => (isText(actual) ? texts.has(foldActual(actual)) : actual !== null && actual !== undefined && others.has(actual));
    }
    case 'labels': {
      const labels = new Set(values.filter(isText).map(key));
      return (actual) => Array.isArray(actual) && actual.some((label) => isText(label) && labels.has(foldCase(label)));
    }
    default: {
      const exact = new Set(values);
      return (actual) => actual !== null && actual !== undefined && exact.has(actual);
    }
  }
}

/** The positive form of each operator; the negated ones answer its opposite. */
const NEGATION: Partial<Record<Operator, Operator>> = { not_equals: 'equals', not_in: 'in', not_contains: 'contains', is_not_set: 'is_set' };

function positiveTest(comparison: Comparison, operator: Operator, value: unknown, key: KeyOf): Test {
  switch (operator) {
    case 'equals':
      return equalsOneOf(comparison, [value], key);
    case 'in':
      return Array.isArray(value) ? equalsOneOf(comparison, value, key) : never;
    case 'contains': {
      if (comparison === 'labels') return equalsOneOf(comparison, [value], key);
      if (!isText(value)) return never;
      const part = key(value);
      return (actual) => isText(actual) && foldActual(actual).includes(part);
    }
    case 'starts_with': {
      if (!isText(value)) return never;
      const start = key(value);
      return (actual) => isText(actual) && foldActual(actual).startsWith(start);
    }
    case 'gt':
      return isNumber(value) ? (actual) => isNumber(actual) && actual > value : never;
    case 'gte':
      return isNumber(value) ? (actual) => isNumber(actual) && actual >= value : never;
    case 'lt':
      return isNumber(value) ? (actual) => isNumber(actual) && actual < value : never;
    case 'lte':
      return isNumber(value) ? (actual) => isNumber(actual) && actual <= value : never;
    case 'is_set':
      return (actual) => actual !== null && actual !== undefined && (!Array.isArray(actual) || actual.length > 0);
    default:
      return never;
  }
}

/** A condition ready to evaluate: its value folded once, whatever the number of evaluations. */
export interface CompiledCondition {
  condition: Condition;
  holds: Test;
}

/**
 * Prepares one condition; `folded`: its text values are already keys (foldConditions). A field the
 * table does not know never holds (validate.ts refuses it first).
 */
export function compileCondition(condition: Condition, folded = false): CompiledCondition {
  const rule = fieldRule(condition.field);
  if (!rule) return { condition, holds: never };
  const positive = NEGATION[condition.operator];
  const key: KeyOf = folded ? (value) => value : (value) => valueKey(rule.comparison, value);
  const test = positiveTest(rule.comparison, positive ?? condition.operator, condition.value, key);
  return { condition, holds: positive ? (actual) => !test(actual) : test };
}

export interface CompiledConditions {
  all: readonly CompiledCondition[];
  /** Undefined when `any` was left out (then it does not count). */
  any: readonly CompiledCondition[] | undefined;
}

export function compileConditions(conditions: Conditions, folded = false): CompiledConditions {
  const compile = (condition: Condition) => compileCondition(condition, folded);
  return { all: (conditions.all ?? []).map(compile), any: conditions.any?.map(compile) };
}

/** The conditions with each text value turned into its key (valueKey): what is stored beside them when saved, so runs fold nothing. */
export function foldConditions(conditions: Conditions): Conditions {
  const fold = (condition: Condition): Condition => {
    const rule = fieldRule(condition.field);
    const { value } = condition;
    if (!rule || value === undefined) return condition;
    const key = (v: string | number | boolean) => (isText(v) ? valueKey(rule.comparison, v) : v);
    return { ...condition, value: Array.isArray(value) ? value.map((v) => key(v) as string | number) : key(value) };
  };
  return { ...(conditions.all && { all: conditions.all.map(fold) }), ...(conditions.any && { any: conditions.any.map(fold) }) };
}

const holdsIn = (compiled: CompiledCondition, context: ConditionContext): boolean => compiled.holds(actualValue(compiled.condition.field, context));

/** Whether the conditions hold whatever they are asked of: none at all (no `all`, no `any`). */
export function holdAlways(compiled: CompiledConditions): boolean {
  return compiled.all.length === 0 && compiled.any === undefined;
}

/** Whether any of the conditions reads `field` (e.g. `time.businessHours`: then the settings are needed to evaluate them). */
export function readsField(compiled: CompiledConditions, field: string): boolean {
  return [...compiled.all, ...(compiled.any ?? [])].some((c) => c.condition.field === field);
}

/** Whether the conditions hold: `all` stops at its first false condition, `any` at its first true one. */
export function conditionsHold(compiled: CompiledConditions, context: ConditionContext): boolean {
  if (!compiled.all.every((c) => holdsIn(c, context))) return false;
  return compiled.any === undefined || compiled.any.some((c) => holdsIn(c, context));
}

function explain(compiled: CompiledCondition, context: ConditionContext): ConditionResult {
  const { condition } = compiled;
  const actual = actualValue(condition.field, context);
  return {
    field: condition.field,
    operator: condition.operator,
    ...(condition.value !== undefined && { value: condition.value }),
    actual,
    result: compiled.holds(actual),
  };
}

/** One condition against the context, explained. */
export function evaluateCondition(condition: Condition, context: ConditionContext): ConditionResult {
  return explain(compileCondition(condition), context);
}

/** Every condition evaluated and explained, `all` first (the dry run; runs ask conditionsHold). */
export function explainConditions(compiled: CompiledConditions, context: ConditionContext): Evaluation {
  const all = compiled.all.map((c) => explain(c, context));
  const any = (compiled.any ?? []).map((c) => explain(c, context));
  const matched = all.every((r) => r.result) && (compiled.any === undefined || any.some((r) => r.result));
  return { matched, conditions: [...all, ...any] };
}

/** `all` (every one holds) and `any` (at least one does), both when both are given; none given: matched. Each explained. */
export function evaluateConditions(conditions: Conditions, context: ConditionContext): Evaluation {
  return explainConditions(compileConditions(conditions), context);
}
