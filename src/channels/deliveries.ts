// Message delivery through Meta, run by the queue: one job per outbound message (queued by
// services/messages.ts with the message), ordered per (channel, contact).
// A meta channel's message goes to the Graph API (a file uploaded first, then the message naming
// it); a sandbox one becomes `sent` and, a moment later,
// `delivered` (its own job), and nothing leaves the machine. Each status change records its
// message.updated event in the statement that ends the job.
import type { Db } from '../db/database.js';
import { sql, type OperationNodeSource } from 'kysely';
import { SYSTEM } from '../actor.js';
import { advanceStatus, getDeliveryTarget, markFailed, markSent, type DeliveryTarget, type MessageError } from '../db/messages.js';
import { moveMessage } from '../services/message-statuses.js';
import {
  instagramAttachmentBody,
  instagramQuickRepliesBody,
  instagramTextBody,
  sendGraphMessage,
  uploadGraphMedia,
  whatsappMediaBody,
  replyingTo,
  whatsappInteractiveBody,
  whatsappTemplateBody,
  whatsappTextBody,
} from './graph.js';
import { actionRefused, runConversationAction } from './conversation.js';
import { findMedia } from '../db/media.js';
import type { MediaStore } from '../media/store.js';
import type { SecretBox } from '../secrets.js';
import type { Logger } from '../logger.js';
import { openMetaSecrets } from './settings.js';
import { enqueue, finishJob, finishJobQuery, type HeldJob } from '../jobs/queue.js';
import type { JobResult, QueueHandler } from '../jobs/worker.js';

export const DELIVERY_QUEUE = 'message-delivery';
export const SANDBOX_RECEIPT_QUEUE = 'sandbox-receipt';
/** How long a sandbox message stays `sent` before it is `delivered`. */
export const SANDBOX_DELIVERY_DELAY_MS = 300;

export interface DeliveryOptions {
  db: Db;
  secrets: SecretBox | undefined;
  /** Where the files of messages with attachments are read from. */
  media: MediaStore;
  graphUrl: string;
  graphTimeoutMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  /** Where an action Meta refuses is logged. */
  logger?: Logger | undefined;
}

const asError = (text: string): MessageError => {
  try {
    const parsed = JSON.parse(text) as Partial<MessageError>;
    if (typeof parsed.code === 'string' && typeof parsed.message === 'string') return { code: parsed.code, message: parsed.message };
  } catch {
    // not ours
  }
  return { code: 'internal_error', message: text };
};

/** The Graph request of a message, or why it cannot be sent. */
function graphBody(target: DeliveryTarget): { body: Record<string, unknown> } | { error: MessageError } {
  const { message, channel, contact } = target;
  if (message.content === null && message.attachments.length === 0) {
    return { error: { code: 'contact_erased', message: 'The contact was erased before the message was sent.' } };
  }
  if (channel.type === 'whatsapp') {
    // By phone when the contact has one, else by BSUID (Meta's `recipient`).
    const recipient = contact.phone ?? contact.whatsapp_user_id;
    if (!recipient) return { error: { code: 'contact_unreachable', message: 'The contact has neither a phone number nor a WhatsApp user id.' } };
    if (message.interactive && 'type' in message.interactive) return { body: whatsappInteractiveBody(recipient, message.interactive) };
    return { body: message.template ? whatsappTemplateBody(recipient, message.template) : whatsappTextBody(recipient, message.content!) };
  }
  if (!contact.instagram_id) return { error: { code: 'contact_unreachable', message: 'The contact has no Instagram id.' } };
  if (message.template) return { error: { code: 'template_not_supported', message: 'Instagram has no message templates.' } };
  if (message.quick_replies?.length) return { body: instagramQuickRepliesBody(contact.instagram_id, message.content!, message.quick_replies) };
  return { body: instagramTextBody(contact.instagram_id, message.content!) };
}

/**
 * The Graph request of a message with a file: the file uploaded first (streamed from the store),
 * then the message naming it. A failed upload is a failure of the send (passing or permanent).
 */
async function graphMediaBody(
  options: DeliveryOptions,
  target: DeliveryTarget,
  accessToken: string,
  signal: AbortSignal,
): Promise<{ body: Record<string, unknown> } | { error: MessageError; transient: boolean }> {
  const { message, channel, contact } = target;
  const attachment = message.attachments[0]!;
  const recipient = channel.type === 'whatsapp' ? (contact.phone ?? contact.whatsapp_user_id) : contact.instagram_id;
  if (!recipient) return { error: { code: 'contact_unreachable', message: `The contact cannot be reached on ${channel.type}.` }, transient: false };
  const media = await findMedia(options.db, message.workspace_id, attachment.id);
  if (!media || media.status !== 'stored' || !media.storage_key) {
    return { error: { code: 'media_unavailable', message: 'The file was deleted before the message was sent.' }, transient: false };
  }
  const bytes = await options.media.get(media.storage_key);
  const uploaded = await uploadGraphMedia({
    baseUrl: options.graphUrl,
    channelType: channel.type,
    externalId: channel.external_id!,
    accessToken,
    attachment: { ...attachment, size: Number(media.size) },
    bytes,
    timeoutMs: options.graphTimeoutMs,
    signal,
  });
  bytes.destroy();
  if (!uploaded.ok) return { error: { code: uploaded.code, message: uploaded.message }, transient: uploaded.transient };
  return {
    body: channel.type === 'whatsapp' ? whatsappMediaBody(recipient, attachment, uploaded.id) : instagramAttachmentBody(recipient, attachment, uploaded.id),
  };
}

/**
 * A message's status change (`change`, an UPDATE returning the message), its message.updated event
 * (by the system) and the job's end, in one statement: one round trip, and all or nothing. No event
 * when the message did not move.
 */
async function settle(db: Db, job: HeldJob, change: OperationNodeSource): Promise<JobResult> {
  await moveMessage(db, job.workspace_id, change, SYSTEM, { also: sql`finished as (${finishJobQuery(job)})` });
  return { kind: 'finished' };
}

export function deliveryHandler(options: DeliveryOptions): QueueHandler<typeof DELIVERY_QUEUE> {
  const { db } = options;

  const fail = (db: Db, job: HeldJob, target: { workspaceId: string; messageId: string }, error: MessageError): Promise<JobResult> =>
    settle(db, job, markFailed(db, target.workspaceId, target.messageId, error));

  return {
    queue: DELIVERY_QUEUE,
    maxAttempts: options.maxAttempts,
    retryBaseMs: options.retryBaseMs,

    async run(job, signal) {
      if (job.payload.action) return runConversationAction(options, job, job.payload.action, signal);
      const { messageId } = job.payload;
      const target = await getDeliveryTarget(db, job.workspace_id, messageId);
      if (!target || target.message.status !== 'queued') return { kind: 'done' };
      const ids = { workspaceId: job.workspace_id, messageId };

      if (target.channel.provider === 'sandbox') {
        return db.transaction().execute(async (trx) => {
          await enqueue(trx, SANDBOX_RECEIPT_QUEUE, { messageId }, { workspaceId: job.workspace_id, runAt: new Date(Date.now() + SANDBOX_DELIVERY_DELAY_MS) });
          return settle(trx, job, markSent(trx, job.workspace_id, messageId, `sandbox.${messageId}`));
        });
      }

      const secrets = openMetaSecrets(options.secrets, target.channel);
      const request = target.message.attachments.length > 0 ? await graphMediaBody(options, target, secrets.accessToken, signal) : graphBody(target);
      if ('error' in request) {
        if ('transient' in request && request.transient) return { kind: 'retry', error: JSON.stringify(request.error) };
        return fail(db, job, ids, request.error);
      }
      const result = await sendGraphMessage({
        baseUrl: options.graphUrl,
        externalId: target.channel.external_id!,
        accessToken: secrets.accessToken,
        body: target.replyToExternalId ? replyingTo(request.body, target.channel.type, target.replyToExternalId) : request.body,
        timeoutMs: options.graphTimeoutMs,
        signal,
      });
      if (result.ok) {
        return settle(db, job, markSent(db, job.workspace_id, messageId, result.externalId));
      }
      const error = { code: result.code, message: result.message };
      if (result.transient) return { kind: 'retry', error: JSON.stringify(error) };
      return fail(db, job, ids, error);
    },

    async giveUp(job, lastError) {
      // An action (a reaction, a read) is not the message: its failure leaves the message's status as it is.
      if (job.payload.action) {
        await actionRefused(options, job, job.payload.action, asError(lastError));
        return void (await finishJob(db, job));
      }
      const { messageId } = job.payload;
      await fail(db, job, { workspaceId: job.workspace_id, messageId }, asError(lastError));
    },
  };
}

/** The sandbox's delivery receipt: a sent message becomes delivered. */
export function sandboxReceiptHandler(db: Db): QueueHandler<typeof SANDBOX_RECEIPT_QUEUE> {
  return {
    queue: SANDBOX_RECEIPT_QUEUE,
    maxAttempts: 5,
    retryBaseMs: 1_000,
    async run(job) {
      const { messageId } = job.payload;
      return settle(db, job, advanceStatus(db, job.workspace_id, messageId, ['sent'], 'delivered'));
    },
    async giveUp(job) {
      await finishJob(db, job);
    },
  };
}
