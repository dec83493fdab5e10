// The one way a test (or `npm run fuzz`) runs the real app in process: createApp on a loopback port,
// on real PostgreSQL (the run's fresh database; DATABASE_URL outside vitest) or an in-memory PGlite,
// counting rate limits in real Redis when there is one.
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import pg from 'pg';
import type { DestinationStream } from 'pino';
import { createApp } from '../../src/app.js';
import { createHttpServer } from '../../src/http-server.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';
import { createSecretBox, type SecretBox } from '../../src/secrets.js';
import { startWorkers, type Workers as Jobs } from '../../src/workers.js';
import { createEventStreams, type StreamOptions } from '../../src/stream/hub.js';
import type { MediaStore } from '../../src/media/store.js';
import { cloneTemplate, databaseUrl, pgliteSeed, redisUrl, template } from './databases.js';

export { databaseUrl, redisUrl };

export interface TestServer {
  baseUrl: string;
  db: Db;
  config: Config;
  redis: Redis | undefined;
  secrets?: SecretBox | undefined;
  /** The job workers, when the test asked for them (`jobs: true`). */
  jobs?: Jobs | undefined;
  close(): Promise<void>;
}

/** The key of every test server of this run (a test that needs another makes its own). */
export const testSecretsKey = randomBytes(32);

export interface StartOptions {
  /** Over the test defaults: NODE_ENV test, a Redis prefix of its own, the key cache off. */
  config?: Partial<Config>;
  /** Count rate limits in this Redis (default: the run's Redis when there is one, else in process). */
  redisUrl?: string | undefined | false;
  /** Serve before Redis is ready (default: wait for it). */
  waitForRedis?: boolean;
  /** Share a database opened by another server of the same test (e.g. two instances). */
  db?: Db;
  /** Where the app logs (a LogCapture's destination, or stderr); nowhere unless given. */
  logs?: DestinationStream;
  /** The level of those logs (default: info when `logs` is given, else TEST_LOG_LEVEL or silent). */
  logLevel?: string;
  /** A PostgreSQL database of the test's own (ownDatabase) instead of the run's. */
  databaseUrl?: string;
  /** Run the job workers (message delivery) in this server, as src/server.ts does. */
  jobs?: boolean;
  /** What seals secrets (default: a box of testSecretsKey); null: none, as without SECRETS_KEY in production. */
  secrets?: SecretBox | null;
  /** Over the event streams' defaults (keep-alive, key check and buffer limit). */
  streams?: Partial<StreamOptions>;
  /** Where media bytes live instead of config.mediaStore's store (a stand-in that fails, say). */
  media?: MediaStore;
}

const databases: Db[] = [];

/** The test file's database, migrated: its PostgreSQL database (or `url`), or a PGlite of its own. */
export async function openDatabase(url: string | undefined = databaseUrl): Promise<Db> {
  const db = createDatabase({ databaseUrl: url, pgliteDir: 'memory://', pgliteData: url ? undefined : pgliteSeed, poolSize: 5 });
  await migrateToLatest(db);
  databases.push(db);
  return db;
}

/**
 * A real database with no tables, where every query of the app fails ("relation does not exist"): on
 * PostgreSQL a new empty database of the run's server (the run's end drops it), on PGlite the run's
 * dump with its schema dropped (cheaper than a PGlite made from nothing). The caller destroys it.
 */
export async function emptyDatabase(): Promise<Db> {
  if (template) return createDatabase({ databaseUrl: await cloneTemplate(template, 'e', 'template0'), pgliteDir: 'memory://', poolSize: 2 });
  const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://', pgliteData: pgliteSeed });
  await sql`drop schema public cascade`.execute(db);
  await sql`create schema public`.execute(db);
  return db;
}

export interface OwnDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A migrated PostgreSQL database of the caller's own on the run's server. Job workers claim every
 * job of their database: a test that runs them (in process or as a service) works in one of these,
 * so it neither takes other tests' jobs (a worker with another Graph double, another secrets key)
 * nor moves their messages on.
 */
export async function ownDatabase(): Promise<OwnDatabase> {
  if (!databaseUrl) throw new Error('ownDatabase needs DATABASE_URL');
  const url = template ? await cloneTemplate(template, 'o') : await createMigrated(databaseUrl);
  return {
    url,
    async drop() {
      const again = new pg.Client({ connectionString: databaseUrl });
      await again.connect();
      await again.query(`drop database if exists ${new URL(url).pathname.slice(1)} with (force)`);
      await again.end();
    },
  };
}

/** Outside vitest (no template): a new database on DATABASE_URL's server, migrated. */
async function createMigrated(serverUrl: string): Promise<string> {
  const name = `sf_own_${randomUUID().replace(/-/g, '')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const db = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://', poolSize: 1 });
  await migrateToLatest(db);
  await db.destroy();
  return url.toString();
}

export async function startServer(options: StartOptions = {}): Promise<TestServer> {
  const dbUrl = options.databaseUrl ?? databaseUrl;
  const db = options.db ?? (await openDatabase(dbUrl));
  const config: Config = Object.freeze({
    ...loadConfig({ NODE_ENV: 'test', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    redisPrefix: `sf-test:${randomUUID()}:`,
    keyCacheTtlMs: 0,
    // Files of the run's tests in the OS temp directory, never under ./data (a test that looks at them gives its own).
    mediaStore: { kind: 'file' as const, dir: path.join(os.tmpdir(), 'sf-test-media') },
    ...options.config,
  });
  const url = options.redisUrl === false ? undefined : (options.redisUrl ?? redisUrl);
  const logger = createLogger(options.logLevel ?? (options.logs ? 'info' : config.logLevel), options.logs);
  const redis = url ? createRedis(url, logger) : undefined;
  if (redis && options.waitForRedis !== false) await waitForReady(redis);
  const secrets = options.secrets === null ? undefined : (options.secrets ?? createSecretBox(testSecretsKey));
  const streams = createEventStreams({ db, databaseUrl: dbUrl, logger, streamsPerKey: config.streamsPerKey, options: options.streams });
  const app = createApp({ config, db, logger, redis, secrets, streams, media: options.media });
  const http = createHttpServer(app, config, logger, streams.slots);
  const { server } = http;
  const jobs = options.jobs ? startWorkers({ db, config: { ...config, databaseUrl: dbUrl }, logger, secrets }) : undefined;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject).listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    db,
    config,
    redis,
    secrets,
    jobs,
    async close() {
      await jobs?.stop(AbortSignal.timeout(5_000));
      // Streams end with a comment saying why: let those last bytes go out, as the drain would.
      await streams.close();
      const until = Date.now() + 2_000;
      while (http.inFlight() > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
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
