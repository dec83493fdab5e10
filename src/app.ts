// The Express application: the request pipeline in the order openapi.yaml's "Order of checks" gives.
import express, { type Express } from 'express';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { literalPlusQuery, specJson, specYaml } from './contract.js';
import { isDatabaseReachable, type Db } from './db/database.js';
import { docsRouter } from './docs.js';
import type { Logger } from './logger.js';
import { authenticate, requireScope } from './middleware/authenticate.js';
import { jsonBody } from './middleware/body.js';
import { cors } from './middleware/cors.js';
import { errorHandler } from './middleware/error-handler.js';
import { createRateLimits } from './middleware/rate-limit.js';
import { requestContext } from './middleware/request-context.js';
import { matchOperation, pathNotFound } from './middleware/routing.js';
import { contractValidator } from './middleware/validator.js';
import { dispatch } from './routes/handler.js';
import { databaseOnlyOperations, handlers } from './routes/index.js';
import { createQueryParser } from './query.js';
import type { SecretBox } from './secrets.js';
import { metaWebhooks } from './routes/webhooks.js';
import { registerEventConsumers } from './event-consumers.js';
import type { EventStreams } from './stream/hub.js';
import { streamTokenCredential } from './stream/tokens.js';
import { openMediaStore } from './media/open-store.js';
import type { MediaStore } from './media/store.js';
import { spoolUpload } from './media/upload.js';
import { bindMetricSources } from './metrics/collect.js';
import { metricsHandler, readMetrics, requestMetrics } from './metrics/http.js';
import { collectProcessMetrics } from './metrics/registry.js';

export interface AppDeps {
  config: Config;
  db: Db;
  logger: Logger;
  /** Shared rate-limit counters; without it they are counted in this process. */
  redis?: Redis | undefined;
  /** Seals and opens channel secrets; without it meta channels cannot be created or served. */
  secrets?: SecretBox | undefined;
  /** The instance's live event streams (src/stream/); without it GET /events/stream is a 503. */
  streams?: EventStreams | undefined;
  /** Where media files' bytes are kept; by default the store MEDIA_STORE names. */
  media?: MediaStore | undefined;
}

export function createApp({ config, db, logger, redis, secrets, streams, media = openMediaStore(config.mediaStore) }: AppDeps): Express {
  // What recording an event starts (automations, AI replies): registered once, before any request.
  registerEventConsumers(config);
  const app = express();
  // Paths are exact: /V1/agents is no endpoint (the contract's own matching, routing.ts, is exact too).
  app.set('case sensitive routing', true);
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  app.set('query parser', createQueryParser(literalPlusQuery));

  const limits = createRateLimits({ config, redis, logger });

  if (config.metricsEnabled) {
    collectProcessMetrics();
    bindMetricSources({ db, streams });
    app.use(requestMetrics());
  }
  app.use(requestContext(app, logger));

  // The API first: its requests do not walk past the service endpoints' layers.
  app.use(
    '/v1',
    cors,
    matchOperation(),
    authenticate({ db, keyCacheTtlMs: config.keyCacheTtlMs, failedAuth: limits.failedAuth, otherCredential: streamTokenCredential(db) }),
    limits.perKey,
    requireScope,
    jsonBody,
    ...contractValidator({ validateResponses: config.validateResponses }),
    spoolUpload(media),
    dispatch(handlers, db, {
      validateResponses: config.validateResponses,
      databaseOnly: databaseOnlyOperations,
      services: { secrets, allowPrivateUrls: config.outboundAllowPrivateUrls, streams, media },
    }),
  );

  // Meta's webhooks: outside /v1, no API key; the raw body is read there, before any JSON parsing.
  app.use('/webhooks/meta', metaWebhooks({ db, secrets, failedAuth: limits.webhookAuth }));

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const database = (await isDatabaseReachable(db)) ? 'up' : 'down';
    const redisState = redis ? (redis.status === 'ready' ? 'up' : 'down') : 'not_configured';
    const status = database === 'down' ? 'unavailable' : redisState === 'down' ? 'degraded' : 'ok';
    res.status(database === 'up' ? 200 : 503).json({ status, database, redis: redisState });
  });
  // Prometheus' scrape, outside /v1 and the contract; on METRICS_PORT's server instead when that is set.
  // Its gauges read this app's queue and streams (a test process may build several apps).
  if (config.metricsEnabled && config.metricsPort === undefined) {
    const read = (): Promise<string> => {
      bindMetricSources({ db, streams });
      return readMetrics();
    };
    app.get('/metrics', metricsHandler({ token: config.metricsToken, read }));
  }
  app.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(specJson);
  });
  app.get('/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(specYaml);
  });
  app.use(docsRouter());

  app.use((_req, _res, next) => next(pathNotFound()));
  app.use(errorHandler);
  return app;
}
