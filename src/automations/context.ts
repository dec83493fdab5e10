// The context a dry run evaluates an automation's conditions in, loaded from a thread as it is now:
// the one loader of it. `message.*` sees the thread's latest inbound message, `nps.score` the
// thread's NPS answer, `time.businessHours` the workspace's own hours in its time zone.
import type { Db } from '../db/database.js';
import { readThreadContext } from '../db/automations.js';
import { isBusinessHours } from '../business-hours.js';
import { loadSettings } from '../services/settings.js';
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

/** The thread's context, or undefined when the workspace has no such thread. */
export async function loadThreadContext(db: Db, workspaceId: string, threadId: string, now: Date): Promise<ConditionContext | undefined> {
  const [row, settings] = await Promise.all([readThreadContext(db, workspaceId, threadId), loadSettings(db, workspaceId)]);
  if (!row) return undefined;
  return {
    thread: { status: row.status, stageId: row.stage_id, agentId: row.agent_id, channelId: row.channel_id, labels: labelsOf(row.thread_labels) },
    channel: { type: row.channel_type },
    contact: { labels: labelsOf(row.contact_labels), attributes: attributesOf(row.contact_attributes) },
    ...(row.has_message && { message: { content: row.message_content } }),
    nps: { score: row.nps_score },
    businessHours: isBusinessHours(settings, now),
  };
}
