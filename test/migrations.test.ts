// Migrations: idempotent, and safe when several processes start on a fresh database together.
import { spawn } from 'node:child_process';
import { sql, type Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest, migrations } from '../src/db/migrate.js';
import { countNpsGroups } from '../src/db/nps-groups.js';
import { countNpsAnswers } from '../src/db/threads.js';
import { claimJobs, enqueueJob } from '../src/jobs/queue.js';
import { parseInstant } from '../src/time.js';
import { databaseUrl } from './helpers/server.js';
import { entryArgs } from './build.js';

const instant = (text: string): bigint => parseInstant(text)!;

const TABLES = [
  'agents',
  'api_keys',
  'automation_runs',
  'automations',
  'channels',
  'contacts',
  'events',
  'idempotency_keys',
  'jobs',
  'media',
  'messages',
  'nps_daily',
  'nps_daily_groups',
  'sla_clocks',
  'sla_metrics',
  'sla_policies',
  'sla_report_blocks',
  'sla_report_state',
  'stages',
  'stream_listeners',
  'stream_tokens',
  'thread_history',
  'threads',
  'webhook_deliveries',
  'webhook_endpoints',
  'workspace_settings',
  'workspaces',
];
const ALL_MIGRATIONS = [
  '0001_initial',
  '0002_nps_daily',
  '0003_channels_and_jobs',
  '0004_funnel_and_crm',
  '0005_idempotency_keys',
  '0006_events_and_webhooks',
  '0007_ai_agents',
  '0008_claim_jobs_function',
  '0009_idempotency_keys_without_foreign_key',
  '0010_one_channel_per_meta_account',
  '0011_sealed_idempotency_results',
  '0012_jobs_of_no_workspace',
  '0013_event_actors',
  '0014_event_stream',
  '0015_human_agents',
  '0016_labels_and_attributes',
  '0017_workspace_settings',
  '0018_stream_listeners',
  '0019_media',
  '0020_automations',
  '0021_all_keys_gain_new_scopes',
  '0022_automation_runs',
  '0023_nps_requests',
  '0024_labels_folded_in_nfc',
  '0025_automation_bounds',
  '0027_contact_identity',
  '0028_service_levels',
  '0029_conversation',
  '0030_stream_consumer',
  '0032_response_time_rollups',
  '0033_claim_jobs_plan_cached',
  '0034_reaction_ids',
  '0035_contacts_by_username',
];

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
      expect(
        tables
          .map((t) => t.name)
          .filter((n) => !n.startsWith('kysely_'))
          .sort(),
      ).toEqual(TABLES);
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
        const runs = await Promise.all([1, 2, 3].map(() => run(process.execPath, entryArgs('scripts/migrate'), env)));

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
      (await sql`select workspace_id, day::text as day, promotores, neutros, detratores from nps_daily order by workspace_id, day`.execute(db)).rows;

    async function migrateWithAnswers(db: Db): Promise<void> {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      const initial = await migrator.migrateTo('0001_initial');
      expect(initial.error).toBeUndefined();
      await seedAtInitial(db);

      const applied = await migrator.migrateTo('0002_nps_daily');

      expect(applied.results?.map((r) => r.migrationName)).toEqual(['0002_nps_daily']);
      expect(await daily(db)).toEqual(DAILY);
      expect(await countNpsAnswers(db, W1, instant('2026-02-28T00:00:00.000000Z'), instant('2026-03-02T23:59:59.999999Z'))).toEqual({
        promotores: 2,
        neutros: 1,
        detratores: 1,
      });
      expect(await countNpsAnswers(db, W1, instant('0001-01-01T00:00:00.000000Z'), instant('2026-03-01T02:59:59.999999Z'))).toEqual({
        promotores: 2,
        neutros: 1,
        detratores: 1,
      });

      const down = await migrator.migrateTo('0001_initial');
      expect(down.error).toBeUndefined();
      expect((await db.introspection.getTables()).map((t) => t.name)).not.toContain('nps_daily');
      expect((await migrator.migrateTo('0002_nps_daily')).results?.map((r) => r.migrationName)).toEqual(['0002_nps_daily']);
      expect(await daily(db)).toEqual(DAILY);
    }

    const AGENT = '01900000-0000-7000-8000-a00000000001';
    const OPEN = '01900000-0000-7000-8000-b00000000001';

    /** What 0004 makes of the database seedAtInitial filled, with one thread given an agent and one open thread added. */
    async function funnelState(db: Kysely<any>) {
      const stages = (await sql<Record<string, any>>`select workspace_id, name, position from stages order by workspace_id, position`.execute(db)).rows;
      const threads = (
        await sql<Record<string, any>>`select t.id, s.position as stage, t.stage_entered_at = t.created_at as entered_at_creation,
                         t.closed_at is not distinct from (case when t.status = 'closed' then t.updated_at end) as closed_at_ok,
                         t.nps_agent_id, ns.position as nps_stage
                    from threads t join stages s on s.workspace_id = t.workspace_id and s.id = t.stage_id
                    left join stages ns on ns.workspace_id = t.workspace_id and ns.id = t.nps_stage_id
                   order by t.id`.execute(db)
      ).rows;
      const groups = (
        await sql<Record<string, any>>`select g.workspace_id, g.dimension, g.day::text as day,
                         case g.dimension when 'stage' then (select position::text from stages s where s.workspace_id = g.workspace_id and s.id = g.key)
                                          else g.key::text end as key,
                         g.promotores, g.neutros, g.detratores
                    from nps_daily_groups g order by 1, 2, 3, 4`.execute(db)
      ).rows;
      return { stages, threads, groups, history: (await sql`select count(*)::int as n from thread_history`.execute(db)).rows };
    }

    async function migrateFunnel(db: Db): Promise<void> {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      expect((await migrator.migrateTo('0001_initial')).error).toBeUndefined();
      await seedAtInitial(db);
      await sql`insert into agents (workspace_id, id, name, status, instructions, model) values (${W1}, ${AGENT}, 'Ana', 'active', 'x', 'm')`.execute(db);
      await sql`update threads set agent_id = ${AGENT} where nps_created_at = '2026-03-01 12:00:00-03'`.execute(db);
      await sql`insert into threads (workspace_id, id, contact_id, channel_id, status) values (${W1}, ${OPEN}, ${W1}, ${W1}, 'open')`.execute(db);

      expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(1));

      const state = await funnelState(db);
      const names = ['Novo', 'Em atendimento', 'Aguardando cliente', 'Resolvido'];
      expect(state.stages).toEqual([W1, W2].flatMap((workspace_id) => names.map((name, i) => ({ workspace_id, name, position: i + 1 }))));
      expect(state.threads).toHaveLength(ANSWERS.length + 1);
      for (const thread of state.threads) {
        expect(thread).toMatchObject({ stage: 1, entered_at_creation: true, closed_at_ok: true });
      }
      const answered = state.threads.filter((t) => t.nps_stage !== null);
      expect(answered).toHaveLength(ANSWERS.filter(([, at]) => at !== null).length);
      expect(answered.filter((t) => t.nps_agent_id === AGENT)).toHaveLength(1);
      // By channel and by stage, the groups are nps_daily's days (one channel, one stage per workspace).
      const byDimension = (dimension: string) => state.groups.filter((g) => g.dimension === dimension).map(({ dimension: _, key: __, ...rest }) => rest);
      expect(byDimension('channel')).toEqual(DAILY);
      expect(byDimension('stage')).toEqual(DAILY);
      expect(state.groups.filter((g) => g.dimension === 'stage').every((g) => g.key === '1')).toBe(true);
      expect(state.groups.filter((g) => g.dimension === 'agent' && g.key === AGENT)).toEqual([
        { workspace_id: W1, dimension: 'agent', day: '2026-03-01', key: AGENT, promotores: 0, neutros: 1, detratores: 0 },
      ]);
      expect(await countNpsGroups(db, W1, instant('0001-01-01T00:00:00.000000Z'), instant('2026-12-31T23:59:59.999999Z'), 'agent')).toEqual([
        { key: AGENT, promotores: 0, neutros: 1, detratores: 0 },
        { key: null, promotores: 2, neutros: 1, detratores: 2 },
      ]);
      expect(state.history).toEqual([{ n: 0 }]);

      expect((await migrator.migrateTo('0002_nps_daily')).error).toBeUndefined();
      expect((await db.introspection.getTables()).map((t) => t.name)).not.toContain('stages');
      expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(2));
      expect(await funnelState(db)).toEqual(state);
    }

    it('when a database at 0001 holds threads and answers, then 0004 gives every workspace the four stages, puts threads in the first and fills nps_daily_groups', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        await migrateFunnel(db);
      } finally {
        await db.destroy();
      }
    });

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

  describe('0021_all_keys_gain_new_scopes', () => {
    it('when a database at 0020 holds a key made with all and a narrower one, then only the first gains the settings and automations scopes', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0020_automations')).error).toBeUndefined();
        const workspace = '01900000-0000-7000-8000-000000000021';
        const before = ['agents:read', 'agents:write', 'contacts:read', 'contacts:write', 'messages:read', 'messages:write', 'channels:write'].concat([
          'funnel:read',
          'funnel:write',
          'webhooks:read',
          'webhooks:write',
        ]);
        await sql`insert into workspaces (id, name) values (${workspace}, 'Loja')`.execute(db);
        const keys: Array<[string, string[]]> = [
          ['01900000-0000-7000-8000-0000000000a1', before],
          ['01900000-0000-7000-8000-0000000000a2', ['contacts:read']],
          ['01900000-0000-7000-8000-0000000000a3', [...before, 'settings:read']],
        ];
        for (const [id, scopes] of keys) {
          await sql`insert into api_keys (workspace_id, id, key_hash, prefix, plan, scopes)
                    values (${workspace}, ${id}, ${id}, 'sk_test', 'pro', ${scopes}::text[])`.execute(db);
        }

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0021_all_keys_gain_new_scopes')));

        const { rows } = await sql<{ id: string; scopes: string[] }>`select id, scopes from api_keys order by id`.execute(db);
        const added = ['settings:read', 'settings:write', 'automations:read', 'automations:write'];
        expect(rows).toEqual([
          // 0028 gives them reports:read in turn: they held every scope of before it.
          { id: keys[0]![0], scopes: [...before, ...added, 'reports:read'] },
          { id: keys[1]![0], scopes: ['contacts:read'] },
          { id: keys[2]![0], scopes: [...before, ...added, 'reports:read'] },
        ]);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0028_service_levels', () => {
    it('when a database at 0025 holds a key with every scope and a narrower one, then only the first gains reports:read, and threads have no sla', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0025_automation_bounds')).error).toBeUndefined();
        const workspace = '01900000-0000-7000-8000-000000000028';
        const every = ['agents:read', 'agents:write', 'contacts:read', 'contacts:write', 'messages:read', 'messages:write', 'channels:write'].concat([
          'funnel:read',
          'funnel:write',
          'webhooks:read',
          'webhooks:write',
          'settings:read',
          'settings:write',
          'automations:read',
          'automations:write',
        ]);
        await sql`insert into workspaces (id, name) values (${workspace}, 'Loja')`.execute(db);
        const keys: Array<[string, string[]]> = [
          ['01900000-0000-7000-8000-0000000000d1', every],
          ['01900000-0000-7000-8000-0000000000d2', ['settings:read']],
        ];
        for (const [id, scopes] of keys) {
          await sql`insert into api_keys (workspace_id, id, key_hash, prefix, plan, scopes)
                    values (${workspace}, ${id}, ${id}, 'sk_test', 'pro', ${scopes}::text[])`.execute(db);
        }

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0025_automation_bounds') + 1));

        const { rows } = await sql<{ id: string; scopes: string[] }>`select id, scopes from api_keys order by id`.execute(db);
        expect(rows).toEqual([
          { id: keys[0]![0], scopes: [...every, 'reports:read'] },
          { id: keys[1]![0], scopes: ['settings:read'] },
        ]);
        await migrator.migrateTo('0025_automation_bounds');
        const tables = (await db.introspection.getTables()).map((table) => table.name);
        expect(tables.filter((name) => name.startsWith('sla_'))).toEqual([]);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0023_nps_requests', () => {
    it('when a database at 0021 holds an nps.answered event and another event, then only the first gets source api', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0021_all_keys_gain_new_scopes')).error).toBeUndefined();
        const workspace = '01900000-0000-7000-8000-000000000023';
        await sql`insert into workspaces (id, name) values (${workspace}, 'Loja')`.execute(db);
        const events: Array<[string, string]> = [
          ['01900000-0000-7000-8000-0000000000e1', 'nps.answered'],
          ['01900000-0000-7000-8000-0000000000e2', 'thread.updated'],
        ];
        for (const [id, type] of events) {
          await sql`insert into events (workspace_id, id, type, data, created_at) values (${workspace}, ${id}, ${type}, '{}'::jsonb, now())`.execute(db);
        }

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0022_automation_runs')));

        const { rows } = await sql<{ id: string; source: string | null }>`select id, source from events order by id`.execute(db);
        expect(rows).toEqual([
          { id: events[0]![0], source: 'api' },
          { id: events[1]![0], source: null },
        ]);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0029_conversation', () => {
    it('when a database at 0025 is migrated, then messages gain reply_to, reactions (empty) and interactive, and going back drops them', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      const columns = async (): Promise<unknown[]> =>
        (
          await sql<{ column_name: string; column_default: string | null; is_nullable: string }>`
            select column_name, column_default, is_nullable from information_schema.columns
             where table_name = 'messages' and column_name in ('reply_to', 'reactions', 'interactive') order by column_name`.execute(db)
        ).rows;
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0025_automation_bounds')).error).toBeUndefined();

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0025_automation_bounds') + 1));
        expect(await columns()).toEqual([
          { column_name: 'interactive', column_default: null, is_nullable: 'YES' },
          { column_name: 'reactions', column_default: "'[]'::jsonb", is_nullable: 'NO' },
          { column_name: 'reply_to', column_default: null, is_nullable: 'YES' },
        ]);

        expect((await migrator.migrateTo('0025_automation_bounds')).error).toBeUndefined();
        expect(await columns()).toEqual([]);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0033_claim_jobs_plan_cached', () => {
    it("when a database at 0032 is migrated, then claim_jobs is PL/pgSQL with the same options and claims, and going back restores 0008's function exactly", async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      const claimFunction = async () =>
        (
          await sql<{ language: string; config: string[]; definition: string }>`
            select l.lanname as language, p.proconfig as config, pg_get_functiondef(p.oid) as definition
              from pg_proc p join pg_language l on l.oid = p.prolang where p.proname = 'claim_jobs'`.execute(db)
        ).rows;
      /** Adds a job to a queue of its own and claims it, with a group allowance: the job's id and the claim. */
      const claimOne = async (queue: string) => {
        const id = await enqueueJob(db, { workspaceId: workspace, queue, payload: { to: 'a' } });
        const claim = await claimJobs(db, { queue, workerId: 'w', limit: 1, leaseMs: 60_000, groups: { field: 'to', allowance: { a: 1 }, otherwise: 0 } });
        return { expected: id, claim };
      };
      const workspace = '01900000-0000-7000-8000-000000000033';
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0032_response_time_rollups')).error).toBeUndefined();
        await sql`insert into workspaces (id, name) values (${workspace}, 'Loja')`.execute(db);
        const before = await claimFunction();

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0033_claim_jobs_plan_cached')));
        const cached = await claimOne('after-0033');
        expect(await claimFunction()).toEqual([
          {
            language: 'plpgsql',
            config: ['enable_bitmapscan=off', 'enable_seqscan=off', 'plan_cache_mode=force_generic_plan'],
            definition: expect.stringContaining('RETURNS TABLE(job jobs, left_behind boolean, next_run_at timestamp with time zone)'),
          },
        ]);
        expect(cached.claim).toEqual({
          jobs: [expect.objectContaining({ id: cached.expected, locked_by: 'w', attempts: 1 })],
          nextRunAt: undefined,
          leftBehind: false,
        });

        expect((await migrator.migrateTo('0032_response_time_rollups')).error).toBeUndefined();
        const restored = await claimOne('back-at-0032');
        expect(before).toEqual([{ language: 'sql', config: ['enable_bitmapscan=off', 'enable_seqscan=off'], definition: expect.any(String) }]);
        expect(await claimFunction()).toEqual(before);
        expect(restored.claim).toEqual({
          jobs: [expect.objectContaining({ id: restored.expected, locked_by: 'w', attempts: 1 })],
          nextRunAt: undefined,
          leftBehind: false,
        });
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0034_reaction_ids', () => {
    it('when a database at 0033 is migrated, then messages gain reaction_ids (empty by default), and going back drops it', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      const columns = async (): Promise<unknown[]> =>
        (
          await sql<{ column_name: string; column_default: string | null; is_nullable: string }>`
            select column_name, column_default, is_nullable from information_schema.columns
             where table_name = 'messages' and column_name = 'reaction_ids'`.execute(db)
        ).rows;
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0033_claim_jobs_plan_cached')).error).toBeUndefined();

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0034_reaction_ids')));
        expect(await columns()).toEqual([{ column_name: 'reaction_ids', column_default: "'{}'::text[]", is_nullable: 'NO' }]);

        expect((await migrator.migrateTo('0033_claim_jobs_plan_cached')).error).toBeUndefined();
        expect(await columns()).toEqual([]);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('0024_labels_folded_in_nfc', () => {
    it('when a database at 0023 holds labels as NFD twins and lower-cased keys, then they are merged in NFC and their keys folded, and ?label= finds them by the new keys', async () => {
      const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        expect((await migrator.migrateTo('0023_nps_requests')).error).toBeUndefined();
        const workspace = '01900000-0000-7000-8000-000000000024';
        await sql`insert into workspaces (id, name) values (${workspace}, 'Loja')`.execute(db);
        const contacts: Array<[string, string[]]> = [
          ['01900000-0000-7000-8000-0000000000c1', ['Cafe\u0301', 'caf\u00e9', 'Straße', 'STRASSE', 'VIP']],
          ['01900000-0000-7000-8000-0000000000c2', ['vip']],
          ['01900000-0000-7000-8000-0000000000c3', []],
        ];
        for (const [id, labels] of contacts) {
          const keys = labels.map((label) => `${workspace}:${label.toLowerCase()}`);
          await sql`insert into contacts (workspace_id, id, name, labels, label_keys)
                    values (${workspace}, ${id}, 'Ana', ${labels}::text[], ${keys}::text[])`.execute(db);
        }

        expect(await migrateToLatest(db)).toEqual(ALL_MIGRATIONS.slice(ALL_MIGRATIONS.indexOf('0024_labels_folded_in_nfc')));

        const { rows } = await sql<{ id: string; labels: string[]; label_keys: string[] }>`
          select id, labels, label_keys from contacts order by id`.execute(db);
        expect(rows).toEqual([
          { id: contacts[0]![0], labels: ['Caf\u00e9', 'Straße', 'VIP'], label_keys: [`${workspace}:caf\u00e9`, `${workspace}:strasse`, `${workspace}:vip`] },
          { id: contacts[1]![0], labels: ['vip'], label_keys: [`${workspace}:vip`] },
          { id: contacts[2]![0], labels: [], label_keys: [] },
        ]);
        const found = await sql<{ id: string }>`select id from contacts where label_keys @> ${[`${workspace}:strasse`]}::text[]`.execute(db);
        expect(found.rows).toEqual([{ id: contacts[0]![0] }]);

        await migrator.migrateTo('0023_nps_requests');
        const { rows: back } = await sql<{ label_keys: string[] }>`select label_keys from contacts order by id limit 1`.execute(db);
        expect(back).toEqual([{ label_keys: [`${workspace}:caf\u00e9`, `${workspace}:straße`, `${workspace}:vip`] }]);
      } finally {
        await db.destroy();
      }
    });
  });
});
