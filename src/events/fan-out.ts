// The event log's one fan-out seam. Whatever an event starts (a webhook delivery per subscribed
// endpoint, the automations it triggers, an AI agent's reply, the live stream's wake-up) is a
// consumer registered here, by name, once at start-up: the log's own webhook deliveries by
// events/record.ts, the others by the composition root (src/event-consumers.ts). A consumer adds WITH
// queries (and NOTIFYs: the queues it fed, the stream) to the one statement that records the event,
// so an event, its deliveries and its jobs commit together, in the change's transaction, and cost no
// round trip of their own. Every event is recorded through it (events/record.ts recording(): no
// trigger on `events` since migration 0030). The log imports no consumer.
//
// The recording statement's text depends only on the event's shape (its type, its actor's type,
// whether it was answered) and on the registered consumers: a consumer sees the event's values as
// placeholders, so its part is built and compiled once per shape (recordingStatement) and each
// event then only fills in its values (Kysely's compile and the statement's assembly were a third of
// a signed inbound's CPU: BENCHMARKS.md, issue 34).
import { CompiledQuery, sql, type RawBuilder } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';

type EventType = components['schemas']['EventType'];

/**
 * An event being recorded, as a consumer sees it; its object is the WITH query `event_source s`
 * (data jsonb, contact_id) of the statement. `type`, `actorType` and `answered` are the event's
 * shape: a consumer's part may depend on them. The others are placeholders of the event's values:
 * use them only as values of `sql` templates (`${event.workspaceId}::uuid`), never compute with them
 * (the statement is refused: recordingStatement), since the part is built once for every event of
 * the shape.
 */
export interface RecordedEvent {
  type: EventType;
  actorType: Actor['type'];
  /** A message the service already answered itself (an NPS score, thanked): consumers that answer messages leave it. */
  answered: boolean;
  workspaceId: string;
  id: string;
  /** The event's instant (timestamptz): cast it (`${event.now}::timestamptz`), derive from it in SQL. */
  now: Date;
  /** The automations whose runs caused the event, first to last (jsonb array text; actor.ts causationOf). */
  chain: string;
  /** The key of the event or silence that began that chain (text), null when no automation did (actor.ts rootOf). */
  root: string;
}

/** What a consumer adds to the recording statement. */
export interface FanOut {
  /** WITH queries (comma-separated, leading comma included) over `event_source s` and `event` (no row: nothing was recorded). */
  with: RawBuilder<unknown>;
  /** Select-list items (leading comma included) that NOTIFY: the queues that got jobs, the live stream. */
  notify: RawBuilder<unknown>;
}

/** A consumer: its part of an event's statement, or undefined when the event is none of its business. */
export type EventConsumer = (event: RecordedEvent) => FanOut | undefined;

const consumers = new Map<string, EventConsumer>();

/**
 * Registers (or replaces, or with undefined removes) the consumer `name`. Call it at start-up;
 * consumers run in the order they were first registered.
 */
export function registerEventConsumer(name: string, consumer: EventConsumer | undefined): void {
  if (consumer) consumers.set(name, consumer);
  else consumers.delete(name);
  // The statements compiled with the consumers before.
  statements.clear();
}

/** Each event's values: the placeholders' (RecordedEvent), and those of the recording statement itself (events/record.ts). */
export type EventInputs = Record<string, unknown>;

/** The placeholders of an event's values: text no value can be (PostgreSQL refuses U+0000 in text), so one left over fails the statement. */
const MARK = '\u0000event-input:';
export const placeholder = (name: string): string => `${MARK}${name}`;
/**
 * The placeholder of the event's instant, known by identity: an invalid date, so an instant computed
 * from it in JS is invalid too (and refused). Its value is sent as ISO text (cast to timestamptz where used).
 */
const NOW = new Date(Number.NaN);

/** The placeholders consumers see, with the event's shape. */
function recordedEvent(type: EventType, actorType: Actor['type'], answered: boolean): RecordedEvent {
  return {
    type,
    actorType,
    answered,
    workspaceId: placeholder('workspaceId'),
    id: placeholder('id'),
    now: NOW,
    chain: placeholder('chain'),
    root: placeholder('root'),
  };
}

/** Every registered consumer's part of the statement recording an event of this shape. */
export function fanOut(type: EventType, actorType: Actor['type'], answered: boolean): FanOut {
  const event = recordedEvent(type, actorType, answered);
  const parts = [...consumers.values()].flatMap((consumer) => consumer(event) ?? []);
  return { with: sql.join([sql``, ...parts.map((part) => part.with)], sql``), notify: sql.join([sql``, ...parts.map((part) => part.notify)], sql``) };
}

/** A statement compiled with placeholders: each parameter the input it stands for, or a constant of the text. */
export interface StatementTemplate {
  sql: string;
  parameters: ReadonlyArray<{ input: string } | { value: unknown }>;
}

/**
 * `compiled` (built with placeholders) as a template; throws when a parameter was computed from a
 * placeholder (a consumer that derived a value in JS would otherwise store the placeholder's
 * value, or the same value, for every event).
 */
export function statementTemplate(compiled: CompiledQuery): StatementTemplate {
  const derived = (value: unknown): boolean =>
    (typeof value === 'string' && value.includes(MARK)) ||
    (value instanceof Date && Number.isNaN(value.getTime())) ||
    (Array.isArray(value) && value.some(derived));
  const parameters = compiled.parameters.map((value) => {
    if (value === NOW) return { input: 'now' };
    if (typeof value === 'string' && value.startsWith(MARK) && !value.includes(MARK, 1)) return { input: value.slice(MARK.length) };
    if (derived(value))
      throw new Error(`an event consumer computed a statement value from an event's placeholder (${String(value).replaceAll('\u0000', '\\0')})`);
    return { value };
  });
  return { sql: compiled.sql, parameters };
}

/** The template filled with an event's values (`now` as ISO text). */
export function bindInputs(template: StatementTemplate, inputs: EventInputs & { now: Date }): CompiledQuery {
  const now = inputs.now.toISOString();
  const values = template.parameters.map((parameter) => {
    if ('value' in parameter) return parameter.value;
    if (parameter.input === 'now') return now;
    if (!(parameter.input in inputs)) throw new Error(`no value for the event's input ${parameter.input}`);
    return inputs[parameter.input];
  });
  return CompiledQuery.raw(template.sql, values);
}

/** Recording statements by shape, compiled once each while the consumers stay the same. */
const statements = new Map<string, StatementTemplate>();
const MAX_STATEMENTS = 1_000;

/**
 * The statement recording an event of this shape as a template: `compile` (the statement, built
 * with fanOut's parts and placeholder() inputs) runs once per shape.
 */
export function recordingStatement(type: EventType, actorType: Actor['type'], answered: boolean, compile: (parts: FanOut) => CompiledQuery): StatementTemplate {
  const key = `${type}|${actorType}|${answered}`;
  let template = statements.get(key);
  if (!template) {
    template = statementTemplate(compile(fanOut(type, actorType, answered)));
    if (statements.size >= MAX_STATEMENTS) statements.clear();
    statements.set(key, template);
  }
  return template;
}
