// The composition root of the queue's work: starts this process's job workers, one per kind of the
// registry (jobs/kinds.ts): message delivery,
// sandbox receipts, statuses that came early, webhook deliveries, inbound files fetched and erased
// files deleted, automations (events' and idle timers'), AI agents' replies when an
// AI_BASE_URL is configured, and the recurring schedules (the purges), on one listener; and
// registers their stop with the process's background work. The queue (src/jobs/) knows none of
// the capabilities; this file is where each kind gets its handler.
import type { Config } from './config.js';
import type { Db } from './db/database.js';
import type { Logger } from './logger.js';
import type { BackgroundWork } from './shutdown.js';
import type { SecretBox } from './secrets.js';
import { deliveryHandler, sandboxReceiptHandler } from './channels/deliveries.js';
import { webhookHandler } from './events/dispatcher.js';
import { createJobListener } from './jobs/listen.js';
import { registerEventConsumers } from './event-consumers.js';
import { aiReplyHandler } from './ai/replies.js';
import { earlyStatusHandler } from './services/provider-statuses.js';
import { purgeEvents } from './events/purge.js';
import { purgeExpiredKeys } from './idempotency.js';
import { automationEventHandler, automationIdleHandler } from './automations/engine.js';
import { purgeAutomationRuns } from './automations/purge.js';
import { slaTimerHandler } from './sla/timers.js';
import type { JobKind, ScheduleName } from './jobs/kinds.js';
import { recurringHandler } from './jobs/recurring.js';
import { startWorker, type QueueHandler, type Worker } from './jobs/worker.js';
import { mediaFetchHandler } from './media/fetch.js';
import { mediaDeleteHandler } from './media/erase.js';
import { openMediaStore } from './media/open-store.js';
import type { MediaStore } from './media/store.js';

export type WorkersConfig = Pick<
  Config,
  | 'databaseUrl'
  | 'databaseDirectUrl'
  | 'metaGraphUrl'
  | 'metaGraphTimeoutMs'
  | 'retryBaseMs'
  | 'retryMaxAttempts'
  | 'deliveryConcurrency'
  | 'jobLeaseMs'
  | 'jobPollMs'
  | 'aiBaseUrl'
  | 'aiApiKey'
  | 'aiTimeoutMs'
  | 'aiConcurrency'
  | 'aiReplyDelayMs'
  | 'automationConcurrency'
  | 'automationsInline'
  | 'webhookRetryDelaysMs'
  | 'outboundAllowPrivateUrls'
  | 'webhookConcurrency'
  | 'webhookEndpointConcurrency'
  | 'mediaStore'
  | 'mediaFetchTimeoutMs'
>;

export interface Workers {
  workers: Worker[];
  stop(deadline: AbortSignal): Promise<void>;
}

/** Inbound files fetched at once per process; one workspace or host gets half (media/fetch-shares.ts). */
const MEDIA_FETCH_SLOTS = 8;

/** Each kind's handler and how many of its jobs run at once here; undefined: this process runs none. */
type KindWorkers = { [K in JobKind]: { handler: QueueHandler<K>; concurrency: number } | undefined };

export function startWorkers(options: {
  db: Db;
  config: WorkersConfig;
  logger: Logger;
  secrets: SecretBox | undefined;
  background?: BackgroundWork;
  /** Where media files' bytes are kept; by default the store MEDIA_STORE names. */
  media?: MediaStore | undefined;
  /** Other intervals for the recurring schedules (tests). */
  scheduleEveryMs?: Partial<Record<ScheduleName, number>>;
}): Workers {
  const { db, config, logger } = options;
  // Jobs record events too (an automation's message, a delivery's status): their consumers first.
  registerEventConsumers(config);
  const media = options.media ?? openMediaStore(config.mediaStore);
  // LISTEN needs a session: behind a transaction pooler, DATABASE_DIRECT_URL's.
  const listener = createJobListener({ db, databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, logger });
  const common = { db, logger, listener, leaseMs: config.jobLeaseMs, pollMs: config.jobPollMs };
  const kinds: KindWorkers = {
    'message-delivery': {
      handler: deliveryHandler({
        db,
        secrets: options.secrets,
        media,
        graphUrl: config.metaGraphUrl,
        graphTimeoutMs: config.metaGraphTimeoutMs,
        maxAttempts: config.retryMaxAttempts,
        retryBaseMs: config.retryBaseMs,
        logger,
      }),
      concurrency: config.deliveryConcurrency,
    },
    'sandbox-receipt': { handler: sandboxReceiptHandler(db), concurrency: 8 },
    'early-status': { handler: earlyStatusHandler(db, logger), concurrency: 8 },
    'webhook-delivery': {
      handler: webhookHandler({
        db,
        secrets: options.secrets,
        retryDelaysMs: config.webhookRetryDelaysMs,
        allowPrivateUrls: config.outboundAllowPrivateUrls,
        endpointConcurrency: config.webhookEndpointConcurrency,
        logger,
      }),
      concurrency: config.webhookConcurrency,
    },
    'ai-reply': config.aiBaseUrl ? { handler: aiReplyHandler({ db, config, logger }), concurrency: config.aiConcurrency } : undefined,
    'media-fetch': {
      handler: mediaFetchHandler({
        db,
        store: media,
        secrets: options.secrets,
        graphUrl: config.metaGraphUrl,
        timeoutMs: config.metaGraphTimeoutMs,
        deadlineMs: config.mediaFetchTimeoutMs,
        slots: MEDIA_FETCH_SLOTS,
        maxAttempts: config.retryMaxAttempts,
        retryBaseMs: config.retryBaseMs,
        allowPrivateUrls: config.outboundAllowPrivateUrls,
        logger,
      }),
      concurrency: MEDIA_FETCH_SLOTS,
    },
    'media-delete': {
      handler: mediaDeleteHandler(media, { maxAttempts: config.retryMaxAttempts, retryBaseMs: config.retryBaseMs }),
      concurrency: 2,
    },
    'automation-event': {
      handler: automationEventHandler({ db, logger, retryBaseMs: config.retryBaseMs }),
      concurrency: config.automationConcurrency,
    },
    'automation-idle': {
      handler: automationIdleHandler({ db, logger, retryBaseMs: config.retryBaseMs }),
      concurrency: config.automationConcurrency,
    },
    'sla-timer': {
      handler: slaTimerHandler({ db, logger, retryBaseMs: config.retryBaseMs }),
      concurrency: config.automationConcurrency,
    },
    recurring: {
      handler: recurringHandler({
        db,
        logger,
        tasks: { 'purge-events': purgeEvents, 'purge-idempotency-keys': purgeExpiredKeys, 'purge-automation-runs': purgeAutomationRuns },
        everyMs: options.scheduleEveryMs,
      }),
      concurrency: 2,
    },
  };
  const workers = Object.values(kinds).flatMap((kind) => (kind ? [startWorker(kind.handler, { ...common, concurrency: kind.concurrency })] : []));
  let stopped: Promise<void> | undefined;
  const jobs: Workers = {
    workers,
    stop(deadline) {
      stopped ??= (async () => {
        await Promise.all(workers.map((worker) => worker.stop(deadline)));
        await listener.close();
      })();
      return stopped;
    },
  };
  options.background?.register('queue-workers', (deadline) => jobs.stop(deadline));
  return jobs;
}
