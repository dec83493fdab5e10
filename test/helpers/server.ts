// Starts the real app on a loopback port for a test file: real PostgreSQL (the run's fresh
// database) or an in-memory PGlite, real Redis when the test asks for it.
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { DestinationStream } from 'pino';
import { inject } from 'vitest';
import { createApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';

export const databaseUrl = inject('databaseUrl');
export const redisUrl = inject('redisUrl');

export interface TestServer {
  baseUrl: string;
  db: Db;
  config: Config;
  redis: Redis | undefined;
  close(): Promise<void>;
}

export interface StartOptions {
  config?: Partial<Config>;
  /** Count rate limits in this Redis (default: the run's Redis when there is one, else in process). */
  redisUrl?: string | undefined | false;
  /** Share a database opened by another server of the same test (e.g. two instances). */
  db?: Db;
  /** Where the app logs (a LogCapture's destination); nowhere unless given. */
  logs?: DestinationStream;
}

const databases: Db[] = [];

/** The test file's database: the run's PostgreSQL database, or a PGlite of its own. */
export async function openDatabase(): Promise<Db> {
  const db = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 5 });
  if (!databaseUrl) await migrateToLatest(db);
  databases.push(db);
  return db;
}

export async function startServer(options: StartOptions = {}): Promise<TestServer> {
  const db = options.db ?? (await openDatabase());
  const config: Config = Object.freeze({
    ...loadConfig({ NODE_ENV: 'test', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    redisPrefix: `sf-test:${randomUUID()}:`,
    keyCacheTtlMs: 0,
    ...options.config,
  });
  const url = options.redisUrl === false ? undefined : (options.redisUrl ?? redisUrl);
  const logger = createLogger(options.logs ? 'info' : config.logLevel, options.logs);
  const redis = url ? createRedis(url, logger) : undefined;
  if (redis) await waitForReady(redis);
  const app = createApp({ config, db, logger, redis });
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    db,
    config,
    redis,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      redis?.disconnect();
      if (!options.db) {
        databases.splice(databases.indexOf(db), 1);
        await db.destroy();
      }
    },
  };
}

export async function waitForReady(redis: Redis, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (redis.status !== 'ready') {
    if (Date.now() > deadline) throw new Error(`Redis not ready (${redis.status})`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
