// The context a dry run evaluates an automation's conditions in, loaded from a thread as it is now:
// the one loader of it. `message.*` sees the thread's latest inbound message, `nps.score` the
// thread's NPS answer. Labels and attributes are read wherever their columns exist (empty when
// they do not), and the business hours are the default ones (Monday to Friday, 09:00 to 18:00 in
// America/Sao_Paulo) until the workspace's own settings are read here.
import type { Db } from '../db/database.js';
import { readThreadContext } from '../db/automations.js';
import type { AttributeValue, ConditionContext } from './conditions.js';

const DEFAULT_TIMEZONE = 'America/Sao_Paulo';
const WEEKDAYS = new Set(['Mon', 'Tue', 'Wed', 'Thu', 'Fri']);

/** Whether `instant` falls in the default business hours. */
export function defaultBusinessHours(instant: Date): boolean {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone: DEFAULT_TIMEZONE, weekday: 'short', hour: '2-digit', hourCycle: 'h23' }).formatToParts(instant);
  const weekday = parts.find((p) => p.type === 'weekday')?.value ?? '';
  const hour = Number(parts.find((p) => p.type === 'hour')?.value);
  return WEEKDAYS.has(weekday) && hour >= 9 && hour < 18;
}

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
  const row = await readThreadContext(db, workspaceId, threadId);
  if (!row) return undefined;
  return {
    thread: { status: row.status, stageId: row.stage_id, agentId: row.agent_id, channelId: row.channel_id, labels: labelsOf(row.thread_labels) },
    channel: { type: row.channel_type },
    contact: { labels: labelsOf(row.contact_labels), attributes: attributesOf(row.contact_attributes) },
    ...(row.has_message && { message: { content: row.message_content } }),
    nps: { score: row.nps_score },
    businessHours: defaultBusinessHours(now),
  };
}
