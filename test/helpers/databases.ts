// Where a test's data lives: under vitest, a PostgreSQL database of the running test file's own (a
// clone of the run's migrated template, test/global-setup.ts, made by test/setup-file.ts before each
// file: files never share one, even when a worker runs several of them with its modules kept) or the
// run's migrated PGlite dump; a script (`npm run fuzz`, a bench) reads the environment. Kept apart
// from server.ts so the per-file setup imports no application code.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';

const services = process.env.VITEST
  ? await runServices()
  : { databaseUrl: process.env.DATABASE_URL || undefined, redisUrl: process.env.REDIS_URL || undefined };

/** The running test file's PostgreSQL database (undefined on PGlite): it changes before each file. */
export let databaseUrl: string | undefined = services.databaseUrl;
export const redisUrl: string | undefined = services.redisUrl;
/** The run's migrated template database, and the server it lives on. */
export const template: { url: string; server: string } | undefined = services.template;
/** Without PostgreSQL: the run's migrated PGlite data directory, each embedded database's start. */
export const pgliteSeed: Blob | undefined = services.pgliteSeed;

async function runServices(): Promise<{ databaseUrl?: string; redisUrl?: string; template?: { url: string; server: string }; pgliteSeed?: Blob }> {
  const { inject } = await import('vitest');
  const templateUrl = inject('databaseTemplate');
  const seed = inject('pgliteSeed');
  return {
    redisUrl: inject('redisUrl'),
    template: templateUrl ? { url: templateUrl, server: inject('databaseServer')! } : undefined,
    pgliteSeed: seed ? new Blob([fs.readFileSync(seed)]) : undefined,
  };
}

/** Before each test file (test/setup-file.ts): a new clone of the template becomes `databaseUrl`. */
export async function useFileDatabase(): Promise<void> {
  if (template) databaseUrl = await cloneTemplate(template, 'f');
}

/** A new database copied from the migrated template, named after it (the run's end drops it). */
export async function cloneTemplate(
  template: { url: string; server: string },
  kind: 'f' | 'o' | 'e',
  from = new URL(template.url).pathname.slice(1),
): Promise<string> {
  const url = new URL(template.url);
  const name = `${url.pathname.slice(1)}_${kind}${randomBytes(8).toString('hex')}`;
  const admin = new pg.Client({ connectionString: template.server });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${from}`);
  } finally {
    await admin.end();
  }
  url.pathname = `/${name}`;
  return url.toString();
}
