// Starts the service: configuration, database (migrated under an advisory lock), the media spool's
// leftovers swept, Redis, HTTP.
// WEB_CONCURRENCY=N forks N workers on one port (node:cluster); SIGTERM/SIGINT drain and stop.
import cluster from 'node:cluster';
import path from 'node:path';
import type { Server } from 'node:http';
import { createApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { autovacuumOff, createDatabase, type Db } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { ensureDemoKey } from './demo.js';
import { createLogger, type Logger } from './logger.js';
import { openMediaStore } from './media/open-store.js';
import { sweepSpool, sweepSpoolEvery } from './media/spool.js';
import { createRedis } from './redis.js';
import { createBackgroundWork } from './shutdown.js';
import { createHttpServer } from './http-server.js';
import { createSecretBox, loadOrCreateKeyFile, unopenableSecrets, type SecretBox } from './secrets.js';
import { sealedKeysInUse } from './db/sealed-keys.js';
import { backoffMs } from './jobs/backoff.js';
import { startWorkers } from './workers.js';
import { createEventStreams } from './stream/hub.js';
import { serveWorkersMetrics } from './metrics/cluster.js';
import { listenForMetrics } from './metrics/http.js';
import { registry } from './metrics/registry.js';

function baseUrl(config: Config, server: Server): string {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  return `http://${host}:${port}`;
}

/**
 * The key secrets are sealed with: SECRETS_KEY, or outside production a key file made under ./data
 * at first start; in production without SECRETS_KEY there is none. The service refuses to start
 * when a stored sealed value (a channel's, an endpoint's, a stored answer's) names a key it lacks:
 * every request needing it would fail.
 */
async function secretBox(config: Config, db: Db): Promise<SecretBox | undefined> {
  let box: SecretBox | undefined;
  let lacking = ', but SECRETS_KEY is not set';
  if (config.secretsKey) {
    box = createSecretBox(config.secretsKey, config.secretsKeyPrevious);
    lacking = ', which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS';
  } else if (config.nodeEnv !== 'production') {
    const dataDir = path.dirname(config.pgliteDir);
    box = createSecretBox(loadOrCreateKeyFile(dataDir));
    lacking = `, which is not the key in ${path.join(dataDir, 'secrets.key')} (SECRETS_KEY is not set)`;
  }
  const problem = unopenableSecrets(box, await sealedKeysInUse(db), lacking);
  if (problem) throw new ConfigError(problem);
  return box;
}

/**
 * What the operator must hear of the PostgreSQL server at start. The statements are planned on
 * the tables' statistics, which autovacuum's ANALYZE keeps fresh: without it, lookups of one row
 * by its key turn into scans of a workspace's rows as the tables grow (README, operations).
 */
async function warnOfServerSettings(db: Db, logger: Logger): Promise<void> {
  if (await autovacuumOff(db)) {
    logger.warn(
      "PostgreSQL runs with autovacuum off: the tables' statistics go stale as they grow and lookups turn into scans; turn it on, or run ANALYZE regularly",
    );
  }
}

async function runWorker(config: Config, logger: Logger, migrate: boolean): Promise<void> {
  const db = createDatabase({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.pgliteDir,
    poolSize: config.databasePoolSize,
    poolWaitMs: config.databasePoolWaitMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    preparedStatements: config.databasePreparedStatements,
  });
  if (migrate) {
    // Behind a transaction pooler the migrator's session lock needs DATABASE_DIRECT_URL.
    const direct = config.databaseDirectUrl ? createDatabase({ databaseUrl: config.databaseDirectUrl, pgliteDir: config.pgliteDir, poolSize: 1 }) : db;
    const applied = await migrateToLatest(direct).finally(() => (direct === db ? undefined : direct.destroy()));
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    await warnOfServerSettings(db, logger);
  }
  // What a killed process was spooling (an upload, a download from Meta) is not left to fill the disk.
  const spoolDir = openMediaStore(config.mediaStore).spoolDir;
  const swept = await sweepSpool(spoolDir);
  if (swept > 0) logger.warn({ spoolDir, files: swept }, 'abandoned spool files removed');
  const demo = config.databaseUrl ? undefined : await ensureDemoKey(db, path.dirname(config.pgliteDir));
  const secrets = await secretBox(config, db);
  if (!secrets) logger.warn('SECRETS_KEY is not set: only sandbox channels can be created');
  const redis = config.redisUrl ? createRedis(config.redisUrl, logger) : undefined;
  const background = createBackgroundWork(logger);
  background.register('spool-sweep', sweepSpoolEvery(spoolDir, logger));
  // Its LISTEN needs a session of its own, as the job workers' does (not through a transaction pooler).
  const streams = createEventStreams({ db, databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, logger, streamsPerKey: config.streamsPerKey });
  // Streams never finish on their own: the drain would wait for them until its deadline.
  background.register('event-streams', () => streams.close());
  const app = createApp({ config, db, logger, redis, secrets, streams });
  const http = createHttpServer(app, config, logger, streams.slots);
  const { server } = http;

  server.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  startWorkers({ db, config, logger, secrets, background });
  // One process serves METRICS_PORT itself; a cluster's primary serves it for all its workers (runPrimary).
  if (!cluster.isWorker && config.metricsEnabled && config.metricsPort !== undefined) {
    const metricsServer = await listenForMetrics({ port: config.metricsPort, host: config.host, token: config.metricsToken });
    background.register('metrics-server', () => metricsServer.close());
    logger.info({ port: metricsServer.port }, 'metrics listening');
  }
  const url = baseUrl(config, server);
  logger.info({ url, database: config.databaseUrl ? 'postgresql' : 'pglite', redis: Boolean(redis) }, 'listening');
  if (demo) {
    // The one human-facing banner: on stderr, so stdout stays JSON logs.
    process.stderr.write(
      [
        '',
        `  Support Funnel API ready (embedded database${demo.created ? ', demo workspace created' : ''})`,
        `  Base URL:  ${url}/v1`,
        `  Docs:      ${url}/docs`,
        `  Demo key:  ${demo.apiKey}   (plan ${demo.plan}, all scopes, workspace ${demo.workspaceId})`,
        `  Try:       curl -H "Authorization: Bearer ${demo.apiKey}" ${url}/v1/agents`,
        '',
      ].join('\n') + '\n',
    );
  }

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    // A second signal (Ctrl-C reaches every worker of a cluster as well as the primary) changes nothing.
    if (stopping) return;
    stopping = true;
    const started = Date.now();
    logger.info({ signal, inFlight: http.inFlight(), timeoutMs: config.shutdownTimeoutMs }, 'draining');
    const deadline = AbortSignal.timeout(config.shutdownTimeoutMs);
    const [drained, unfinished] = await Promise.all([http.drain(deadline), background.stopAll(deadline)]);
    await Promise.allSettled([db.destroy(), redis?.quit()]);
    const clean = drained.cut === 0 && unfinished.length === 0;
    logger[clean ? 'info' : 'warn'](
      { inFlight: drained.inFlight, answered: drained.inFlight - drained.cut, cut: drained.cut, unfinished, ms: Date.now() - started },
      'stopped',
    );
    // Set after closing: closing PGlite resets process.exitCode.
    process.exit(clean ? 0 : 1);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/**
 * Forks the workers and keeps them running. A worker that dies is replaced, after a growing pause
 * while replacements keep dying before they listen; but if no worker ever started listening (port
 * taken, database unreachable), the service exits 1 like a single process would, rather than
 * forking forever.
 */
async function runPrimary(config: Config, logger: Logger): Promise<void> {
  const db = createDatabase({ databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, pgliteDir: config.pgliteDir, poolSize: 1 });
  const applied = await migrateToLatest(db);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  await warnOfServerSettings(db, logger);
  await db.destroy();
  let stopping = false;
  let started = false;
  let workerFailed = false;
  /** Workers in a row that died before listening: their restarts back off. */
  let earlyExits = 0;
  const live = new Set<number>();
  const listened = new Set<number>();
  const restarts = new Set<NodeJS.Timeout>();
  cluster.on('fork', (worker) => live.add(worker.id));
  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const timer of restarts) clearTimeout(timer);
    if (live.size === 0) process.exit(process.exitCode ? 1 : 0);
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    // Each worker drains within SHUTDOWN_TIMEOUT_MS; one that does not is killed.
    setTimeout(() => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
    }, config.shutdownTimeoutMs + 5_000).unref();
  };
  cluster.on('listening', (worker) => {
    started = true;
    listened.add(worker.id);
    earlyExits = 0;
  });
  cluster.on('exit', (worker, code, signal) => {
    const diedListening = listened.delete(worker.id);
    live.delete(worker.id);
    if (stopping) {
      // The primary exits when its last worker has; non-zero when any worker cut work short.
      if (code !== 0) workerFailed = true;
      if (live.size === 0) process.exit(workerFailed || process.exitCode ? 1 : 0);
      return;
    }
    if (!started) {
      logger.error({ workerPid: worker.process.pid, code, signal }, 'a worker failed to start; stopping');
      process.exitCode = 1;
      stop();
      return;
    }
    earlyExits = diedListening ? 0 : earlyExits + 1;
    const restartDelayMs = earlyExits === 0 ? 0 : backoffMs(earlyExits, { baseMs: 1_000, maxMs: 30_000, jitter: 0 });
    logger.error({ workerPid: worker.process.pid, code, signal, restartInMs: restartDelayMs }, 'worker exited; starting another');
    const timer = setTimeout(() => {
      restarts.delete(timer);
      cluster.fork();
    }, restartDelayMs);
    restarts.add(timer);
  });
  if (config.metricsEnabled) {
    serveWorkersMetrics();
    if (config.metricsPort !== undefined) {
      const metricsServer = await listenForMetrics({
        port: config.metricsPort,
        host: config.host,
        token: config.metricsToken,
        read: () => registry.clusterMetrics(),
      });
      logger.info({ port: metricsServer.port }, 'metrics listening');
    }
  }
  for (let i = 0; i < config.webConcurrency; i++) cluster.fork();
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/**
 * A promise nobody awaited that failed is logged, and the process goes on: it is a bug to fix, not a
 * reason to drop every request in flight. An uncaught exception leaves the process in an unknown
 * state: logged, then the process exits (a cluster's primary starts another worker).
 */
function logProcessFailures(logger: Logger): void {
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception; exiting');
    process.exit(1);
  });
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  logProcessFailures(logger);
  if (config.webConcurrency > 1 && !config.databaseUrl) {
    logger.warn('WEB_CONCURRENCY is ignored on the embedded database (PGlite serves one process); set DATABASE_URL');
  }
  const clustered = config.webConcurrency > 1 && Boolean(config.databaseUrl);
  if (clustered && cluster.isPrimary) return runPrimary(config, logger);
  await runWorker(config, logger, !clustered);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
