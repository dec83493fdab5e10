// Once per run: a fresh PostgreSQL database (when DATABASE_URL is set), migrated, and dropped at the
// end; each test file then works in workspaces of its own. In CI both services are required.
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string | undefined;
    redisUrl: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const serverUrl = process.env.DATABASE_URL || undefined;
  const redisUrl = process.env.REDIS_URL || undefined;
  if (process.env.CI && (!serverUrl || !redisUrl)) {
    throw new Error('CI runs against real services: set DATABASE_URL and REDIS_URL');
  }
  project.provide('redisUrl', redisUrl);
  if (!serverUrl) {
    process.stdout.write('\nDATABASE_URL is not set: tests run on the embedded PGlite database.\n');
    if (!redisUrl) process.stdout.write('REDIS_URL is not set: the tests that need Redis are SKIPPED (shown as skipped below).\n\n');
    project.provide('databaseUrl', undefined);
    return async () => {};
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
  project.provide('databaseUrl', url.toString());
  if (!redisUrl) process.stdout.write('\nREDIS_URL is not set: the tests that need Redis are SKIPPED (shown as skipped below).\n\n');
  return async () => {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  };
}
