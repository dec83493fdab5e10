// Starts the service: configuration, database (migrated under an advisory lock), Redis, HTTP.
// WEB_CONCURRENCY=N forks N workers on one port (node:cluster); SIGTERM/SIGINT drain and stop.
import cluster from 'node:cluster';
import path from 'node:path';
import type { Server } from 'node:http';
import { createApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createDatabase } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { ensureDemoKey } from './demo.js';
import { createLogger, type Logger } from './logger.js';
import { createRedis } from './redis.js';

function baseUrl(config: Config, server: Server): string {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  return `http://${host}:${port}`;
}

async function runWorker(config: Config, logger: Logger, migrate: boolean): Promise<void> {
  const db = createDatabase({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir, poolSize: config.databasePoolSize });
  if (migrate) {
    const applied = await migrateToLatest(db);
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  }
  const demo = config.databaseUrl ? undefined : await ensureDemoKey(db, path.dirname(config.pgliteDir));
  const redis = config.redisUrl ? createRedis(config.redisUrl, logger) : undefined;
  const app = createApp({ config, db, logger, redis });

  const server = app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
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
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    server.close(async () => {
      await Promise.allSettled([db.destroy(), redis?.quit()]);
      process.exit(0);
    });
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 10_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/**
 * Forks the workers and keeps them running. A worker that dies is replaced, after a growing pause
 * while replacements keep dying before they listen; but if no worker ever started listening (port
 * taken, database unreachable), the service exits 1 like a single process would, rather than
 * forking forever.
 */
async function runPrimary(config: Config, logger: Logger): Promise<void> {
  const db = createDatabase({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir, poolSize: 1 });
  const applied = await migrateToLatest(db);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  await db.destroy();
  let stopping = false;
  let started = false;
  let restartDelayMs = 0;
  const listened = new Set<number>();
  const restarts = new Set<NodeJS.Timeout>();
  const stop = () => {
    stopping = true;
    for (const timer of restarts) clearTimeout(timer);
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  };
  cluster.on('listening', (worker) => {
    started = true;
    listened.add(worker.id);
    restartDelayMs = 0;
  });
  cluster.on('exit', (worker, code, signal) => {
    const diedListening = listened.delete(worker.id);
    if (stopping) return;
    if (!started) {
      logger.error({ workerPid: worker.process.pid, code, signal }, 'a worker failed to start; stopping');
      process.exitCode = 1;
      stop();
      return;
    }
    restartDelayMs = diedListening ? 0 : Math.min(Math.max(restartDelayMs * 2, 1_000), 30_000);
    logger.error({ workerPid: worker.process.pid, code, signal, restartInMs: restartDelayMs }, 'worker exited; starting another');
    const timer = setTimeout(() => {
      restarts.delete(timer);
      cluster.fork();
    }, restartDelayMs);
    restarts.add(timer);
  });
  for (let i = 0; i < config.webConcurrency; i++) cluster.fork();
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
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
  if (config.webConcurrency > 1 && !config.databaseUrl) {
    logger.warn('WEB_CONCURRENCY is ignored on the embedded database (PGlite serves one process); set DATABASE_URL');
  }
  const clustered = config.webConcurrency > 1 && Boolean(config.databaseUrl);
  if (clustered && cluster.isPrimary) return runPrimary(config, logger);
  await runWorker(config, logger, !clustered);
}

main().catch((err: unknown) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
