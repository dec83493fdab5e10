// Actions on a message sent to Meta through the delivery queue, in order with the contact's
// messages (services/conversation.ts queues them): our reaction (WhatsApp `type: reaction`) and
// marking the customer's message read (WhatsApp `status: read`, with `typing_indicator`; Instagram
// `sender_action` mark_seen, then typing_on). Neither changes the message's status: a failure is
// retried while passing (as a message is) and otherwise logged and dropped; a reaction that never
// reached the customer is taken off the message again.
import type { Db } from '../db/database.js';
import { getDeliveryTarget, type DeliveryTarget } from '../db/messages.js';
import type { ConversationAction } from '../jobs/kinds.js';
import type { Job } from '../jobs/queue.js';
import type { JobResult } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { instagramSenderActionBody, sendGraphMessage, whatsappReactionBody, whatsappReadBody } from './graph.js';
import type { SecretBox } from '../secrets.js';
import { withdrawRefusedReaction } from '../services/conversation.js';
import { openMetaSecrets } from './settings.js';

export interface ActionOptions {
  db: Db;
  secrets: SecretBox | undefined;
  graphUrl: string;
  graphTimeoutMs: number;
  logger?: Logger | undefined;
}

/** The Graph requests of an action, in order; none when there is nothing to send (a sandbox channel, an unreachable contact). */
export function actionBodies(target: DeliveryTarget, action: ConversationAction): Array<Record<string, unknown>> {
  const { message, channel, contact } = target;
  if (channel.provider !== 'meta' || !message.external_id) return [];
  if (channel.type === 'whatsapp') {
    if (action.type === 'read') return [whatsappReadBody(message.external_id, action.typing)];
    // By phone when the contact has one, else by BSUID (Meta's `recipient`).
    const recipient = contact.phone ?? contact.whatsapp_user_id;
    return recipient ? [whatsappReactionBody(recipient, message.external_id, action.emoji)] : [];
  }
  // Instagram takes no reactions from the API (refused before they are queued).
  if (action.type !== 'read' || !contact.instagram_id) return [];
  return [
    instagramSenderActionBody(contact.instagram_id, 'mark_seen'),
    ...(action.typing ? [instagramSenderActionBody(contact.instagram_id, 'typing_on')] : []),
  ];
}

/**
 * An action Meta refused for good, or that failed every attempt: logged, and a reaction taken off
 * the message again (services/conversation.ts), since the customer never sees it.
 */
export async function actionRefused(options: ActionOptions, job: Job<'message-delivery'>, action: ConversationAction, error: unknown): Promise<void> {
  options.logger?.warn({ workspaceId: job.workspace_id, messageId: job.payload.messageId, action: action.type, error }, 'conversation action refused by Meta');
  if (action.type === 'reaction') await withdrawRefusedReaction(options.db, job.workspace_id, job.payload.messageId, action.emoji);
}

/** Runs the action of a delivery job: its Graph requests one after the other; a passing failure retries them all. */
export async function runConversationAction(
  options: ActionOptions,
  job: Job<'message-delivery'>,
  action: ConversationAction,
  signal: AbortSignal,
): Promise<JobResult> {
  const target = await getDeliveryTarget(options.db, job.workspace_id, job.payload.messageId);
  const bodies = target ? actionBodies(target, action) : [];
  if (target && bodies.length > 0) {
    const { accessToken } = openMetaSecrets(options.secrets, target.channel);
    for (const body of bodies) {
      const result = await sendGraphMessage({
        baseUrl: options.graphUrl,
        externalId: target.channel.external_id!,
        accessToken,
        body,
        timeoutMs: options.graphTimeoutMs,
        signal,
      });
      if (result.ok) continue;
      const error = { code: result.code, message: result.message };
      if (result.transient) return { kind: 'retry', error: JSON.stringify(error) };
      await actionRefused(options, job, action, error);
      break;
    }
  }
  return { kind: 'done' };
}
