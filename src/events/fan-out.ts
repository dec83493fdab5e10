// The event log's one fan-out seam. Whatever an event starts (a webhook delivery per subscribed
// endpoint, the automations it triggers, an AI agent's reply, the live stream's wake-up) is a
// consumer registered here, by name, once at start-up: the log's own webhook deliveries by
// events/record.ts, the others by the composition root (src/event-consumers.ts). A consumer adds WITH
// queries (and NOTIFYs: the queues it fed, the stream) to the one statement that records the event,
// so an event, its deliveries and its jobs commit together, in the change's transaction, and cost no
// round trip of their own. Every event is recorded through it (events/record.ts recording(): no
// trigger on `events` since migration 0030). The log imports no consumer. A consumer may also have
// an inline part (InlineConsumer): for an event its recorder offers it (recordEvent's `inline`: a
// customer's message), what the consumer would have queued is done in the change's own transaction
// instead, right after the event's statement, and its statement part leaves it out.
//
// The recording statement's text depends only on the event's shape (its type, its actor's type,
// whether it was answered) and on the registered consumers: a consumer sees the event's values as
// placeholders, so its part is built and compiled once per shape (recordingStatement) and each
// event then only fills in its values (Kysely's compile and the statement's assembly were a third of
// a signed inbound's CPU: BENCHMARKS.md, issue 34).
import { CompiledQuery, sql, type RawBuilder, type Transaction } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import type { Database } from '../db/schema.js';

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
  /**
   * The consumer's inline part runs for this event in the change's own transaction, right after its
   * statement (recordEvent's `inline`, only for a consumer registered with one): leave out what that does.
   */
  inline: boolean;
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

/** An event recorded with `inline`, as a consumer's inline part sees it: its values, not placeholders. */
export interface InlineEvent {
  workspaceId: string;
  type: EventType;
  id: string;
  /** The event's object, as recorded. */
  object: Record<string, unknown>;
  now: Date;
}

/**
 * A consumer's inline part: what it would have queued for an event, done instead in the change's
 * own transaction right after the event's statement (which its FanOut part then leaves it out of).
 * `run` must not fail the change for its own sake: it undoes its own work and queues it when that fails.
 */
export interface InlineConsumer {
  /**
   * Starts, once per transaction and before its events, a read of whether the workspace gives `run`
   * anything to do (sent with the transaction's next statement: no round trip of its own); its answer.
   */
  prepare(trx: Transaction<Database>, workspaceId: string): Promise<() => Promise<boolean>>;
  run(trx: Transaction<Database>, event: InlineEvent): Promise<void>;
}

/** The inline parts prepared for a transaction (prepareInline): each one's answer, by consumer. */
export type InlineParts = ReadonlyMap<string, () => Promise<boolean>>;

const consumers = new Map<string, { consumer: EventConsumer; inline: InlineConsumer | undefined }>();

/**
 * Registers (or replaces, or with undefined removes) the consumer `name`, with its inline part if it
 * has one. Call it at start-up; consumers run in the order they were first registered.
 */
export function registerEventConsumer(name: string, consumer: EventConsumer | undefined, inline?: InlineConsumer): void {
  if (consumer) consumers.set(name, { consumer, inline });
  else consumers.delete(name);
  // The statements compiled with the consumers before.
  statements.clear();
}

/**
 * Prepares the registered consumers' inline parts for the events a transaction will record with
 * `inline` (recordEvent): call it before them, best before the transaction's first statement.
 */
export async function prepareInline(trx: Transaction<Database>, workspaceId: string): Promise<InlineParts> {
  const parts = new Map<string, () => Promise<boolean>>();
  for (const [name, { inline }] of consumers) if (inline) parts.set(name, await inline.prepare(trx, workspaceId));
  return parts;
}

/** Runs the prepared inline parts that have something to do for an event recorded with them, in order, in its transaction. */
export async function runInlineConsumers(trx: Transaction<Database>, parts: InlineParts, event: InlineEvent): Promise<void> {
  for (const [name, { inline }] of consumers) {
    const wanted = parts.get(name);
    if (inline && wanted && (await wanted())) await inline.run(trx, event);
  }
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
function recordedEvent(type: EventType, actorType: Actor['type'], answered: boolean): Omit<RecordedEvent, 'inline'> {
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
export function fanOut(type: EventType, actorType: Actor['type'], answered: boolean, inline = false): FanOut {
  const event = recordedEvent(type, actorType, answered);
  const parts = [...consumers.values()].flatMap(({ consumer, inline: part }) => consumer({ ...event, inline: inline && part !== undefined }) ?? []);
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
export function recordingStatement(
  type: EventType,
  actorType: Actor['type'],
  shape: { answered: boolean; inline: boolean; change?: string },
  compile: (parts: FanOut) => CompiledQuery,
): StatementTemplate {
  const key = `${type}|${actorType}|${shape.answered}|${shape.inline}|${shape.change ?? ''}`;
  let template = statements.get(key);
  if (!template) {
    template = statementTemplate(compile(fanOut(type, actorType, shape.answered, shape.inline)));
    if (statements.size >= MAX_STATEMENTS) statements.clear();
    statements.set(key, template);
  }
  return template;
}
