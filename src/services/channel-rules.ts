// Meta's messaging rules as pure functions, as the use cases apply them (sending, receiving, NPS,
// conversation): the 24-hour window, statuses that only move forward, and how a template or a
// non-text message reads as text, and who WhatsApp cannot reach. In services/, which imports no channel adapter (channels/ imports services/).
import type { MessageStatus } from '../db/schema.js';
import { ApiError } from '../errors.js';

export const MESSAGING_WINDOW_MS = 24 * 60 * 60 * 1000;

/**
 * Whether free text may go to a contact on a Meta channel: they wrote on it within the last 24
 * hours. Never-wrote (null) is outside.
 */
export function withinMessagingWindow(lastInboundAt: Date | null, now: Date): boolean {
  return lastInboundAt !== null && now.getTime() - lastInboundAt.getTime() <= MESSAGING_WINDOW_MS;
}

/**
 * The 422 of any message to a WhatsApp contact with neither a phone nor a BSUID (nothing to send
 * to), checked before the window, on sandbox channels too; undefined when it has one. `detail`
 * names where the request points at the contact.
 */
export function whatsappUnreachable(
  contact: { phone: string | null; whatsapp_user_id: string | null },
  detail: { path: string; message: string },
): ApiError | undefined {
  if (contact.phone || contact.whatsapp_user_id) return undefined;
  return new ApiError(422, 'contact_unreachable', 'The contact cannot be reached on WhatsApp: it has neither a phone nor a WhatsApp user id.', [detail]);
}

const RANK: Record<Exclude<MessageStatus, 'failed'>, number> = { queued: 0, sent: 1, delivered: 2, read: 3 };

/**
 * The statuses a message may be in for a provider status `to` to apply: forward only along
 * queued < sent < delivered < read; `failed` only before delivery. Empty for anything else.
 */
export function statusesBefore(to: string): MessageStatus[] {
  if (to === 'failed') return ['queued', 'sent'];
  if (!(to in RANK) || to === 'queued') return [];
  const rank = RANK[to as keyof typeof RANK];
  return (Object.keys(RANK) as Array<keyof typeof RANK>).filter((status) => RANK[status] < rank);
}

/** How a template message reads in a thread: `[template name] first, second`. */
export function templateContent(template: { name: string; parameters?: string[] | undefined }): string {
  const parameters = template.parameters ?? [];
  return parameters.length > 0 ? `[template ${template.name}] ${parameters.join(', ')}` : `[template ${template.name}]`;
}
