// Migrations: idempotent, and safe when several processes start on a fresh database together.
import { spawn } from 'node:child_process';
import { sql, type Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest, migrations } from '../src/db/migrate.js';
import { countNpsAnswers } from '../src/db/threads.js';
import { parseInstant } from '../src/services/nps.js';
import { databaseUrl } from './helpers/server.js';

const instant = (text: string): bigint => parseInstant(text)!;

const TABLES = ['agents', 'api_keys', 'channels', 'contacts', 'messages', 'nps_daily', 'threads', 'workspaces'];
const ALL_MIGRATIONS = ['0001_initial', '0002_nps_daily'];

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

      expect(first).toEqual(ALL_MIGRATIONS);
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
        expect(applied).toEqual(ALL_MIGRATIONS);
        const check = new pg.Client({ connectionString: url.toString() });
        await check.connect();
        const { rows } = await check.query<{ name: string }>('select name from kysely_migration order by name');
        await check.end();
        expect(rows).toEqual(ALL_MIGRATIONS.map((name) => ({ name })));
      } finally {
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.end();
      }
    });
  });

  describe('0002_nps_daily', () => {
    const W1 = '01900000-0000-7000-8000-000000000001';
    const W2 = '01900000-0000-7000-8000-000000000002';
    /** Answers as a database at 0001 holds them: [workspace, nps_created_at, nps_score]. */
    const ANSWERS: Array<[string, string | null, number | null]> = [
      [W1, '2026-03-01 00:00:00+00', 10],
      [W1, '2026-02-28 23:59:59.999999+00', 9],
      [W1, '2026-03-01 12:00:00-03', 7],
      [W1, '2026-03-01 23:30:00-03', 0],
      [W1, '1969-12-31 23:59:59.999999+00', 6],
      [W1, '0001-01-01 00:00:00+00', 8],
      [W1, null, null],
      [W2, '2026-03-01 10:00:00+00', 3],
    ];
    const DAILY = [
      { workspace_id: W1, day: '0001-01-01', promotores: 0, neutros: 1, detratores: 0 },
      { workspace_id: W1, day: '1969-12-31', promotores: 0, neutros: 0, detratores: 1 },
      { workspace_id: W1, day: '2026-02-28', promotores: 1, neutros: 0, detratores: 0 },
      { workspace_id: W1, day: '2026-03-01', promotores: 1, neutros: 1, detratores: 0 },
      { workspace_id: W1, day: '2026-03-02', promotores: 0, neutros: 0, detratores: 1 },
      { workspace_id: W2, day: '2026-03-01', promotores: 0, neutros: 0, detratores: 1 },
    ];

    async function seedAtInitial(db: Kysely<any>): Promise<void> {
      for (const [n, workspaceId] of [W1, W2].entries()) {
        await sql`insert into workspaces (id, name) values (${workspaceId}, ${`Workspace ${n}`})`.execute(db);
        await sql`insert into contacts (workspace_id, id, name) values (${workspaceId}, ${workspaceId}, 'Contato')`.execute(db);
        await sql`insert into channels (workspace_id, id, type, name) values (${workspaceId}, ${workspaceId}, 'whatsapp', 'WhatsApp')`.execute(db);
      }
      for (const [n, [workspaceId, answeredAt, score]] of ANSWERS.entries()) {
        await sql`
          insert into threads (workspace_id, id, contact_id, channel_id, status, nps_score, nps_created_at)
          values (${workspaceId}, ${`01900000-0000-7000-8000-1000000000${String(n).padStart(2, '0')}`}, ${workspaceId}, ${workspaceId},
                  'closed', ${score}, ${answeredAt}::timestamptz)`.execute(db);
      }
    }

    const daily = async (db: Kysely<any>) =>
      (
        await sql`select workspace_id, day::text as day, promotores, neutros, detratores from nps_daily order by workspace_id, day`.execute(db)
      ).rows;

    async function migrateWithAnswers(db: Db): Promise<void> {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      const initial = await migrator.migrateTo('0001_initial');
      expect(initial.error).toBeUndefined();
      await seedAtInitial(db);

      const applied = await migrateToLatest(db);

      expect(applied).toEqual(['0002_nps_daily']);
      expect(await daily(db)).toEqual(DAILY);
      expect(await countNpsAnswers(db, W1, instant('2026-02-28T00:00:00.000000Z'), instant('2026-03-02T23:59:59.999999Z'))).toEqual({ promotores: 2, neutros: 1, detratores: 1 });
      expect(await countNpsAnswers(db, W1, instant('0001-01-01T00:00:00.000000Z'), instant('2026-03-01T02:59:59.999999Z'))).toEqual({ promotores: 2, neutros: 1, detratores: 1 });

      const down = await migrator.migrateTo('0001_initial');
      expect(down.error).toBeUndefined();
      expect((await db.introspection.getTables()).map((t) => t.name)).not.toContain('nps_daily');
      expect(await migrateToLatest(db)).toEqual(['0002_nps_daily']);
      expect(await daily(db)).toEqual(DAILY);
    }

    it('when a database at 0001 holds answers, then migrating to latest fills nps_daily with them per UTC day', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        await migrateWithAnswers(db);
      } finally {
        await db.destroy();
      }
    });

    it.skipIf(!databaseUrl)('when a PostgreSQL database at 0001 holds answers, then migrating to latest fills nps_daily with them per UTC day', async () => {
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      const name = `sf_backfill_${Date.now()}_${process.pid}`;
      await admin.query(`create database ${name}`);
      const url = new URL(databaseUrl!);
      url.pathname = `/${name}`;
      const db = createDatabase({ databaseUrl: url.toString(), pgliteDir: 'memory://' });
      try {
        await migrateWithAnswers(db);
      } finally {
        await db.destroy();
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.end();
      }
    });
  });
});
