// The event log's one fan-out seam. Whatever an event starts (a webhook delivery per subscribed
// endpoint, the automations it triggers, an AI agent's reply, the live stream's wake-up) is a
// consumer registered here, by name, once at start-up: the log's own webhook deliveries by
// events/record.ts, the others by the composition root (src/event-consumers.ts). A consumer adds WITH
// queries (and NOTIFYs: the queues it fed, the stream) to the one statement that records the event,
// so an event, its deliveries and its jobs commit together, in the change's transaction, and cost no
// round trip of their own. Every event is recorded through it (events/record.ts recording(): no
// trigger on `events` since migration 0030). The log imports no consumer.
import { sql, type RawBuilder } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';

type EventType = components['schemas']['EventType'];

/** An event being recorded, as a consumer sees it; its object is the WITH query `event_source s` (data jsonb, contact_id) of the statement. */
export interface RecordedEvent {
  workspaceId: string;
  id: string;
  type: EventType;
  actor: Actor;
  now: Date;
  /** A message the service already answered itself (an NPS score, thanked): consumers that answer messages leave it. */
  answered: boolean;
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
}

/** Every registered consumer's part of the statement recording `event`. */
export function fanOut(event: RecordedEvent): FanOut {
  const parts = [...consumers.values()].flatMap((consumer) => consumer(event) ?? []);
  return { with: sql.join([sql``, ...parts.map((part) => part.with)], sql``), notify: sql.join([sql``, ...parts.map((part) => part.notify)], sql``) };
}
