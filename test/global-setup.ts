// Once per run: the schema migrated once, then copied for each test file (test/helpers/server.ts) so
// files that run side by side in parallel workers never share a database. On PostgreSQL (DATABASE_URL)
// a migrated template database that each file clones and that the end drops with every clone; on the
// embedded PGlite a migrated data directory dumped to a file that each embedded database loads.
// In CI both services are required.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { createDatabase, embeddedDatabaseOf } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The migrated PostgreSQL database each test file clones (CREATE DATABASE ... TEMPLATE). */
    databaseTemplate: string | undefined;
    /** DATABASE_URL as given: where a test file connects to clone the template. */
    databaseServer: string | undefined;
    /** Without PostgreSQL: a dumped, migrated PGlite data directory each embedded database loads. */
    pgliteSeed: string | undefined;
    redisUrl: string | undefined;
  }
}

interface RunDatabases {
  databaseTemplate: string | undefined;
  databaseServer: string | undefined;
  pgliteSeed: string | undefined;
  drop(): Promise<void>;
}

/** Each vitest project runs this setup: the first prepares the run's databases, the last to finish drops them. */
const run = globalThis as { supportFunnelTestDatabases?: { ready: Promise<RunDatabases>; users: number } };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redisUrl = process.env.REDIS_URL || undefined;
  run.supportFunnelTestDatabases ??= { ready: prepare(redisUrl), users: 0 };
  const shared = run.supportFunnelTestDatabases;
  shared.users += 1;
  const databases = await shared.ready;
  project.provide('redisUrl', redisUrl);
  project.provide('databaseTemplate', databases.databaseTemplate);
  project.provide('databaseServer', databases.databaseServer);
  project.provide('pgliteSeed', databases.pgliteSeed);
  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    run.supportFunnelTestDatabases = undefined;
    await databases.drop();
  };
}

async function prepare(redisUrl: string | undefined): Promise<RunDatabases> {
  const serverUrl = process.env.DATABASE_URL || undefined;
  if (process.env.CI && (!serverUrl || !redisUrl)) {
    throw new Error('CI runs against real services: set DATABASE_URL and REDIS_URL');
  }
  if (!serverUrl) {
    process.stdout.write('\nDATABASE_URL is not set: tests run on the embedded PGlite database.\n');
    if (!redisUrl) process.stdout.write('REDIS_URL is not set: the tests that need Redis are SKIPPED (shown as skipped below).\n\n');
    const seed = await dumpMigratedPglite();
    return { databaseTemplate: undefined, databaseServer: undefined, pgliteSeed: seed, drop: async () => fs.rmSync(seed, { force: true }) };
  }
  const name = `sf_test_${Date.now()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const db = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://' });
  await migrateToLatest(db);
  await db.destroy();
  if (!redisUrl) process.stdout.write('\nREDIS_URL is not set: the tests that need Redis are SKIPPED (shown as skipped below).\n\n');
  return {
    databaseTemplate: url.toString(),
    databaseServer: serverUrl,
    pgliteSeed: undefined,
    async drop() {
      // Every clone (named after the template), several at once: each drop waits for a checkpoint, which
      // drops side by side share; then the template.
      const clones = await admin.query<{ datname: string }>(`select datname from pg_database where datname like $1 and datname <> $2`, [`${name}%`, name]);
      const names = clones.rows.map((row) => row.datname);
      await Promise.all(
        Array.from({ length: Math.min(8, names.length) }, async () => {
          const client = new pg.Client({ connectionString: serverUrl });
          await client.connect();
          try {
            for (let next = names.pop(); next; next = names.pop()) await client.query(`drop database if exists ${next} with (force)`);
          } finally {
            await client.end();
          }
        }),
      );
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

/** A fresh embedded database migrated once and dumped to a file of the OS temp directory. */
async function dumpMigratedPglite(): Promise<string> {
  const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
  await migrateToLatest(db);
  const dump = await embeddedDatabaseOf(db)!.dumpDataDir('none');
  const file = path.join(os.tmpdir(), `sf-test-pglite-${Date.now()}-${process.pid}.tar`);
  fs.writeFileSync(file, Buffer.from(await dump.arrayBuffer()));
  await db.destroy();
  return file;
}
