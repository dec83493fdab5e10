// What the provider (Meta) says about our messages: a status (sent, delivered, read, failed) moves its outbound
// message forward and records message.updated. Meta can call back about a message before this
// service has stored the id Meta gave it (the status overtakes the answer to the send, or its
// commit): such a status is held as a job and looked at again for about a quarter of a minute.
import { SYSTEM } from '../actor.js';
import { transact, type Db } from '../db/database.js';
import { externalIdExists, providerStatusChange, type MessageError } from '../db/messages.js';
import { moveMessage } from './message-statuses.js';
import { enqueue, finishJob } from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { statusesBefore } from './channel-rules.js';

export const EARLY_STATUS_QUEUE = 'early-status';
/** When a held status is first looked at again, and the base of the backoff after that. */
export const EARLY_STATUS_RETRY_MS = 1_000;
/** Looks at a held status in all (after about 1, 2, 4, 8 and 16 s), then it is dropped. */
const EARLY_STATUS_ATTEMPTS = 5;

/** A provider's status of one of our messages, by the id the provider gave the message. */
export interface ProviderStatus {
  externalId: string;
  status: string;
  error?: MessageError | undefined;
}

/**
 * Applies a status to the channel's outbound message with that provider id, with its event (by the
 * system), in one statement: `applied`; `stale` when the message is already at or past it (statuses
 * only move forward); `unknown` when no message has that id (yet).
 */
export async function applyStatus(db: Db, workspaceId: string, channelId: string, status: ProviderStatus, now: Date): Promise<'applied' | 'stale' | 'unknown'> {
  const change = providerStatusChange(db, workspaceId, channelId, status.externalId, statusesBefore(status.status), status.status as never, status.error);
  if (change && (await moveMessage(db, workspaceId, change, SYSTEM, { now }))) return 'applied';
  return (await externalIdExists(db, workspaceId, channelId, status.externalId)) ? 'stale' : 'unknown';
}

/**
 * Holds a status of an unknown message to be applied once its message has the id; in the
 * transaction that received it. Statuses of one message are looked at in the order they came.
 */
export async function holdEarlyStatus(db: Db, workspaceId: string, channelId: string, status: ProviderStatus, now: Date): Promise<void> {
  await enqueue(
    db,
    EARLY_STATUS_QUEUE,
    { channelId, externalId: status.externalId, status: status.status, ...(status.error && { error: status.error }) },
    { workspaceId, orderingKey: `${channelId}:${status.externalId}`, runAt: new Date(now.getTime() + EARLY_STATUS_RETRY_MS), createdAt: now },
  );
}

/** The held statuses: applied (or found stale) once their message has the id, else dropped. */
export function earlyStatusHandler(db: Db, logger: Logger): QueueHandler<typeof EARLY_STATUS_QUEUE> {
  return {
    queue: EARLY_STATUS_QUEUE,
    maxAttempts: EARLY_STATUS_ATTEMPTS,
    retryBaseMs: EARLY_STATUS_RETRY_MS,
    run(job) {
      const { channelId, ...status } = job.payload;
      return transact(db, async (trx) => {
        if ((await applyStatus(trx, job.workspace_id, channelId, status, new Date())) === 'unknown') {
          // Waiting is what a held status is for: its looks are not failures worth a log line each.
          return { kind: 'retry', error: 'no message has this id yet', expected: true } as const;
        }
        await finishJob(trx, job);
        return { kind: 'finished' } as const;
      });
    },
    // The one line a held status ever logs (its looks before are logged at debug by the worker).
    async giveUp(job) {
      const { channelId, externalId, status } = job.payload;
      logger.info({ channelId, externalId, status, jobId: job.id }, 'a status of a message this channel never sent was dropped');
      await finishJob(db, job);
    },
  };
}
