// The context an automation's conditions are evaluated in: the one loader of it, for runs and the
// dry run alike. A thread as it is now (its channel's type, its contact's labels and attributes,
// its NPS answer), the workspace's own business hours in its time zone, and the message: a run's
// is its triggering message (message triggers only), the dry run's the thread's latest inbound one.
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
export type MessageSeen = 'latest-inbound' | { content: string | null } | undefined;

/** What conditions see of the records; the business hours are added for the instant of evaluation (withHours). */
export type Facts = Omit<ConditionContext, 'businessHours'>;

/** The thread's facts, or undefined when the workspace has no such thread. */
export async function threadFacts(db: Db, workspaceId: string, threadId: string, message: MessageSeen): Promise<Facts | undefined> {
  const row = await readThreadContext(db, workspaceId, threadId);
  return row && factsOf(row, message);
}

/** The facts of a thread's context row (readThreadContext's). */
export function factsOf(row: ThreadContextRow, message: MessageSeen): Facts {
  const seen = message === 'latest-inbound' ? (row.has_message ? { content: row.message_content } : undefined) : message;
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

/** The context of `facts` at `now`: whether it is inside the workspace's business hours, in its time zone. */
export const withHours = (facts: Facts, settings: Settings, now: Date): ConditionContext => ({ ...facts, businessHours: isBusinessHours(settings, now) });

/** The dry run's context: the thread now, its latest inbound message. */
export async function loadThreadContext(db: Db, workspaceId: string, threadId: string, now: Date): Promise<ConditionContext | undefined> {
  const [facts, settings] = await Promise.all([threadFacts(db, workspaceId, threadId, 'latest-inbound'), loadSettings(db, workspaceId)]);
  return facts && withHours(facts, settings, now);
}
