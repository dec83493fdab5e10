// The context an automation's conditions are evaluated in: the one loader of it, for runs and the
// dry run alike. A thread as it is now (its channel's type, its contact's labels and attributes,
// its NPS answer), the workspace's own business hours in its time zone, and the message: a run's
// is its triggering message (message triggers only), the dry run's the thread's latest inbound one.
// A run of a thread event (or contact.created) sees the thread (the contact) as its event carries
// it, not as later changes left it: what a run does depends on the events, never on how soon it ran.
import type { Db } from '../db/database.js';
import { readThreadContext, type ThreadContextRow } from '../db/automations.js';
import { readContactContext } from '../db/automation-runs.js';
import { isBusinessHours } from '../business-hours.js';
import { loadSettings, type Settings } from '../services/settings.js';
import type { AttributeValue, ConditionContext } from './conditions.js';

const labelsOf = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

function attributesOf(value: unknown): Record<string, AttributeValue> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).filter((entry): entry is [string, AttributeValue] =>
      ['string', 'number', 'boolean'].includes(typeof entry[1]),
    ),
  );
}

/** The message conditions see: the thread's latest inbound one, a given one, or none (a trigger without a message). */
export type MessageSeen = 'latest-inbound' | { content: string | null; replyId?: string | null } | undefined;

/** What conditions see of the records; the business hours are added for the instant of evaluation (withHours). */
export type Facts = Omit<ConditionContext, 'businessHours'>;

/** The thread's facts, or undefined when the workspace has no such thread. */
export async function threadFacts(db: Db, workspaceId: string, threadId: string, message: MessageSeen): Promise<Facts | undefined> {
  const row = await readThreadContext(db, workspaceId, threadId);
  return row && factsOf(row, message);
}

/** The facts of a thread's context row (readThreadContext's). */
export function factsOf(row: ThreadContextRow, message: MessageSeen): Facts {
  const seen = message === 'latest-inbound' ? (row.has_message ? { content: row.message_content, replyId: row.message_reply_id } : undefined) : message;
  return {
    thread: { status: row.status, stageId: row.stage_id, agentId: row.agent_id, channelId: row.channel_id, labels: labelsOf(row.thread_labels) },
    channel: { type: row.channel_type },
    contact: { labels: labelsOf(row.contact_labels), attributes: attributesOf(row.contact_attributes) },
    ...(seen && { message: seen }),
    nps: { score: row.nps_score },
  };
}

/** A contact's facts (contact.created has no thread), or undefined when the contact is gone. */
export async function contactFacts(db: Db, workspaceId: string, contactId: string): Promise<Facts | undefined> {
  const row = await readContactContext(db, workspaceId, contactId);
  if (!row) return undefined;
  return { contact: { labels: labelsOf(row.labels), attributes: attributesOf(row.attributes) } };
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Triggers whose event's object is the thread (thread.* conditions then see it as the event has it). */
const THREAD_EVENTS: ReadonlySet<string> = new Set(['thread.created', 'thread.updated', 'nps.answered', 'sla.warning', 'sla.breached']);

/**
 * The facts the triggering event's object gives: a thread event's thread, contact.created's
 * contact; nothing for the other triggers (their conditions see the records as the run finds them).
 */
export function eventFacts(trigger: string, object: unknown, metric?: string | null): Partial<Facts> {
  if (!isRecord(object)) return {};
  if (THREAD_EVENTS.has(trigger)) {
    const { status, stageId, agentId, channelId, labels } = object;
    if (typeof status !== 'string' || typeof stageId !== 'string' || typeof channelId !== 'string') return {};
    const thread = { status, stageId, channelId, agentId: typeof agentId === 'string' ? agentId : null, labels: labelsOf(labels) };
    return metric ? { thread, sla: { metric } } : { thread };
  }
  if (trigger === 'contact.created') return { contact: { labels: labelsOf(object.labels), attributes: attributesOf(object.attributes) } };
  return {};
}

const sameValue = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** `seen`'s object with each field that changed from `before` to `after` taken from `after`. */
function carried<T extends object>(seen: T | undefined, before: T | undefined, after: T | undefined): T | undefined {
  if (!seen || !before || !after) return after;
  const fields = Object.keys(after) as (keyof T)[];
  return Object.fromEntries(fields.map((field) => [field, sameValue(before[field], after[field]) ? seen[field] : after[field]])) as T;
}

/**
 * What conditions see after an automation acted: the records as they are now (`after`), but for
 * the thread and the contact, the fields this run did not change (equal in `before` and `after`;
 * the thread is locked by the run) keep what `seen` had, the event's version of them.
 */
export function carryChanges(seen: Facts, before: Facts, after: Facts): Facts {
  return { ...after, thread: carried(seen.thread, before.thread, after.thread), contact: carried(seen.contact, before.contact, after.contact) };
}

/** The context of `facts` at `now`: whether it is inside the workspace's business hours, in its time zone. */
export const withHours = (facts: Facts, settings: Readonly<Settings>, now: Date): ConditionContext => ({
  ...facts,
  businessHours: isBusinessHours(settings, now),
});

/** The dry run's context: the thread now, its latest inbound message. */
export async function loadThreadContext(db: Db, workspaceId: string, threadId: string, now: Date): Promise<ConditionContext | undefined> {
  const [facts, settings] = await Promise.all([threadFacts(db, workspaceId, threadId, 'latest-inbound'), loadSettings(db, workspaceId)]);
  return facts && withHours(facts, settings, now);
}
