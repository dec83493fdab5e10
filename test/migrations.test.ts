// Migrations: idempotent, and safe when several processes start on a fresh database together.
import { spawn } from 'node:child_process';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { databaseUrl } from './helpers/server.js';

const TABLES = ['agents', 'api_keys', 'channels', 'contacts', 'messages', 'threads', 'workspaces'];

function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('migrations', () => {
  it('when applied twice, then the second run applies nothing and the schema is complete', async () => {
    const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
    try {
      const first = await migrateToLatest(db);
      const second = await migrateToLatest(db);
      const tables = await db.introspection.getTables();

      expect(first).toEqual(['0001_initial']);
      expect(second).toEqual([]);
      expect(tables.map((t) => t.name).filter((n) => !n.startsWith('kysely_')).sort()).toEqual(TABLES);
    } finally {
      await db.destroy();
    }
  });

  describe.skipIf(!databaseUrl)('on PostgreSQL (needs DATABASE_URL)', () => {
    it('when two processes migrate a fresh database at once, then each migration is applied exactly once', async () => {
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      const name = `sf_migrate_${Date.now()}_${process.pid}`;
      await admin.query(`create database ${name}`);
      const url = new URL(databaseUrl!);
      url.pathname = `/${name}`;
      try {
        const env = { DATABASE_URL: url.toString(), LOG_LEVEL: 'silent' };
        const runs = await Promise.all([1, 2, 3].map(() => run(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], env)));

        for (const r of runs) expect(r.code, r.stderr).toBe(0);
        const applied = runs.flatMap((r) => (JSON.parse(r.stdout) as { applied: string[] }).applied);
        expect(applied).toEqual(['0001_initial']);
        const check = new pg.Client({ connectionString: url.toString() });
        await check.connect();
        const { rows } = await check.query<{ name: string }>('select name from kysely_migration order by name');
        await check.end();
        expect(rows).toEqual([{ name: '0001_initial' }]);
      } finally {
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.end();
      }
    });
  });
});
