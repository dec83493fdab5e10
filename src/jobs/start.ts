// Starts this process's job workers (message delivery, sandbox receipts, statuses that came early,
// webhook deliveries, and AI agents' replies when an AI_BASE_URL is configured) on one listener, and
// registers their stop with the process's background work.
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import type { BackgroundWork } from '../shutdown.js';
import type { SecretBox } from '../channels/secrets.js';
import { deliveryHandler, sandboxReceiptHandler } from './deliveries.js';
import { webhookHandler } from '../events/dispatcher.js';
import { createJobListener } from './listen.js';
import { aiReplyHandler } from '../ai/replies.js';
import { earlyStatusHandler } from '../channels/statuses.js';
import { startWorker, type Worker } from './worker.js';

export type JobsConfig = Pick<
  Config,
  | 'databaseUrl'
  | 'databaseDirectUrl'
  | 'metaGraphUrl'
  | 'metaGraphTimeoutMs'
  | 'deliveryRetryBaseMs'
  | 'deliveryMaxAttempts'
  | 'deliveryConcurrency'
  | 'jobLeaseMs'
  | 'jobPollMs'
  | 'aiBaseUrl'
  | 'aiApiKey'
  | 'aiTimeoutMs'
  | 'aiConcurrency'
  | 'webhookRetryDelaysMs'
  | 'webhookAllowPrivateUrls'
  | 'webhookConcurrency'
  | 'webhookEndpointConcurrency'
>;

export interface Jobs {
  workers: Worker[];
  stop(deadline: AbortSignal): Promise<void>;
}

export function startJobs(options: { db: Db; config: JobsConfig; logger: Logger; secrets: SecretBox | undefined; background?: BackgroundWork }): Jobs {
  const { db, config, logger } = options;
  // LISTEN needs a session: behind a transaction pooler, DATABASE_DIRECT_URL's.
  const listener = createJobListener({ db, databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, logger });
  const common = { db, logger, listener, leaseMs: config.jobLeaseMs, pollMs: config.jobPollMs };
  const workers = [
    startWorker(
      deliveryHandler({
        db,
        secrets: options.secrets,
        graphUrl: config.metaGraphUrl,
        graphTimeoutMs: config.metaGraphTimeoutMs,
        maxAttempts: config.deliveryMaxAttempts,
        retryBaseMs: config.deliveryRetryBaseMs,
      }),
      { ...common, concurrency: config.deliveryConcurrency },
    ),
    startWorker(sandboxReceiptHandler(db), { ...common, concurrency: 8 }),
    startWorker(earlyStatusHandler(db, logger), { ...common, concurrency: 8 }),
    startWorker(
      webhookHandler({
        db,
        secrets: options.secrets,
        retryDelaysMs: config.webhookRetryDelaysMs,
        allowPrivateUrls: config.webhookAllowPrivateUrls,
        endpointConcurrency: config.webhookEndpointConcurrency,
        logger,
      }),
      { ...common, concurrency: config.webhookConcurrency },
    ),
  ];
  if (config.aiBaseUrl) workers.push(startWorker(aiReplyHandler({ db, config, logger }), { ...common, concurrency: config.aiConcurrency }));
  let stopped: Promise<void> | undefined;
  const jobs: Jobs = {
    workers,
    stop(deadline) {
      stopped ??= (async () => {
        await Promise.all(workers.map((worker) => worker.stop(deadline)));
        await listener.close();
      })();
      return stopped;
    },
  };
  options.background?.register('jobs', (deadline) => jobs.stop(deadline));
  return jobs;
}
