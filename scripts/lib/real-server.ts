// The real server as a separate process, for the scripts that test it from outside (the contract
// tests, the generated-client check): a scratch database of its own on DATABASE_URL's server (or
// PGlite in a temp dir), an enterprise key made before it starts, `node --import tsx src/server.ts`
// on a loopback port, and every child process and the database gone on the way out.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { provision, SCOPES, type Provisioned } from '../../src/provisioning.js';

export const root = fileURLToPath(new URL('../..', import.meta.url));

// ---- child processes: each in its own process group, all of it killed on the way out ----------

const children = new Set<ChildProcess>();
const cleanups: Array<() => void> = [];

/** Starts a child in a process group of its own, with its output piped. */
export function start(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

const running = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM to the child's whole group, SIGKILL after `graceMs`; resolves once it has exited. */
export async function stop(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (!running(child)) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  killGroup(child, 'SIGTERM');
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  killGroup(child, 'SIGKILL'); // anything the child itself started and left behind
}

/** A scratch directory removed when the process exits. */
export function scratchDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

process.on('exit', () => {
  for (const child of children) killGroup(child, 'SIGKILL');
  for (const cleanup of cleanups) cleanup();
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\n${path.basename(process.argv[1] ?? 'script')}: ${signal}, stopping\n`);
    void Promise.allSettled([...children].map((child) => stop(child, 5_000))).finally(() => process.exit(130));
  });
}

/** Stops every child still running (a script failing on its way out). */
export async function stopAll(): Promise<void> {
  await Promise.allSettled([...children].map((child) => stop(child, 5_000)));
}

// ---- the database and the server -------------------------------------------------------------

/** A fresh database on the DATABASE_URL server; the returned function drops it. */
export async function createScratchDatabase(url: string, prefix: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${Date.now()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const scratch = new URL(url);
  scratch.pathname = `/${name}`;
  return {
    url: scratch.toString(),
    async drop() {
      const again = new pg.Client({ connectionString: url });
      await again.connect();
      await again.query(`drop database if exists ${name} with (force)`);
      await again.end();
    },
  };
}

/** An enterprise key with every scope in a new workspace, made in this process before the server starts. */
export async function provisionKey(databaseUrl: string | undefined, pgliteDir: string, workspaceName: string): Promise<Provisioned> {
  const db = createDatabase({ databaseUrl, pgliteDir, poolSize: 1 });
  try {
    await migrateToLatest(db);
    return await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName });
  } finally {
    await db.destroy();
  }
}

export interface RealServer {
  child: ChildProcess;
  /** The API's base URL, ending in /v1. */
  baseUrl: string;
  /** Log lines at warn level or above, but those about the machine it runs on (ENVIRONMENT_WARNINGS). */
  problems: string[];
  /** The warnings about the machine it runs on, not about the code. */
  notices: string[];
}

/**
 * Warnings the server logs about the machine it runs on, not about its code: a check of the code
 * reports them and goes on. PostgreSQL without autovacuum is this workplace's server as configured.
 */
const ENVIRONMENT_WARNINGS = [/^PostgreSQL runs with autovacuum off/];

/** `node --import tsx src/server.ts` on 127.0.0.1 and a port of the kernel's choosing, as shipped (production). */
export async function startRealServer(options: { databaseUrl: string | undefined; pgliteDir: string; env?: NodeJS.ProcessEnv }): Promise<RealServer> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // As shipped: the server does not validate its own responses, so clients see the wire.
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    WEB_CONCURRENCY: '1',
    // Counters of this run only, in the shared Redis.
    REDIS_PREFIX: `sf-script:${randomUUID()}:`,
    // Production seals Meta channels' secrets (and warns without a key): this run's own.
    SECRETS_KEY: randomBytes(32).toString('base64'),
    // Uploaded files beside the run's database, in its scratch directory, not under ./data.
    MEDIA_STORE: `file:${path.join(path.dirname(options.pgliteDir), 'media')}`,
    ...options.env,
  };
  if (options.databaseUrl) env.DATABASE_URL = options.databaseUrl;
  else {
    env.DATABASE_URL = '';
    env.PGLITE_DIR = options.pgliteDir;
  }
  const child = start(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: root, env });
  const problems: string[] = [];
  const notices: string[] = [];
  let stderr = '';
  let partial = '';
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start within 120 s:\n${stderr}`)), 120_000);
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        let entry: { level?: number; msg?: string; url?: string };
        try {
          entry = JSON.parse(line) as typeof entry;
        } catch {
          continue;
        }
        if ((entry.level ?? 0) >= 40) (ENVIRONMENT_WARNINGS.some((warning) => warning.test(entry.msg ?? '')) ? notices : problems).push(line);
        if (entry.msg === 'listening' && entry.url) {
          clearTimeout(timer);
          resolve(entry.url);
        }
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code ?? signal}) before listening:\n${stderr}`));
    });
  });
  return { child, baseUrl: `${baseUrl}/v1`, problems, notices };
}
