// Bulk seeding of a fresh benchmark database: the service's own migrations and provisioning, then
// the bulk rows in a handful of set-based INSERT ... SELECT generate_series statements (threads
// moving through the funnel, with three stage entries each in their history), and the NPS daily
// rollups filled from them.
import pg from 'pg';
import { connectClient } from './lib/pg-client.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { NPS_DAILY_BACKFILL } from '../src/db/migrations/0002_nps_daily.js';
import { NPS_DAILY_GROUPS_BACKFILL } from '../src/db/migrations/0004_funnel_and_crm.js';
import { DEFAULT_STAGES, provision, SCOPES } from '../src/provisioning.js';

export interface SeedShape {
  workspaces: number;
  agentsPerWorkspace: number;
  contactsPerWorkspace: number;
  threadsPerWorkspace: number;
  /** Share of closed threads that carry an NPS answer. */
  npsShare: number;
  /** `pro` keys for the rate-limited variant (requests cycle through them so no limit is hit). */
  proKeys: number;
}

export const FULL_SHAPE: SeedShape = {
  workspaces: 10,
  agentsPerWorkspace: 1_000,
  contactsPerWorkspace: 1_000,
  threadsPerWorkspace: 100_000,
  npsShare: 0.3,
  proKeys: 20,
};

export interface Fixture {
  databaseUrl: string;
  /** The measured workspace (the one the keys belong to). */
  workspaceId: string;
  enterpriseKey: string;
  enterpriseKeyId: string;
  proKeys: string[];
  /** Every (contact, channel) pair of the measured workspace; each has an open thread. */
  pairs: Array<{ contactId: string; channelId: string }>;
  /** The open threads of the measured workspace. */
  openThreadIds: string[];
  /** The measured workspace's stages, in funnel order. */
  stageIds: string[];
  counts: Record<string, number>;
  /** Share of the threads table's pages marked all-visible after the seed's VACUUM. */
  allVisiblePercent: number;
  /** Seconds per step, and the total. */
  timings: Record<string, number>;
}

/** The database URL of `name` on the same server as `adminUrl`. */
export function databaseUrlFor(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A UUIDv7 (as the service makes them) for the timestamp expression `ts`: the 48-bit millisecond
 * time and the version nibble laid over a random v4, so ids sort by time and the primary keys fill
 * the way the service's own inserts do. `seq` fills the 12 bits after the version.
 */
const uuid7 = (ts: string, seq: string): string =>
  `encode(overlay(uuid_send(gen_random_uuid()) placing int8send(((extract(epoch from ${ts}) * 1000)::bigint << 16) | 28672 | ((${seq}) & 4095)) from 1 for 8), 'hex')::uuid`;

const LOAD_SESSIONS = 2;

/**
 * A thread's two stays before its current stage, from its opening time `ts`: 10 min to 2 h in Novo,
 * then 1 h to 24 h in Em atendimento, each at most 30 % of the thread's age at `t0` so no move lies in
 * the future. Functions of `ts` alone, so the thread load and the history load agree.
 */
const stay = (ts: string, t0: string, n: 1 | 2): string => {
  const [base, spread] = n === 1 ? ["interval '10 minutes'", 6_600] : ["interval '1 hour'", 82_800];
  return `least(greatest(${t0} - ${ts}, interval '0') * 0.3, ${base} + (abs(hashint8((extract(epoch from ${ts}) * 1000)::bigint + ${n})) % ${spread}) * interval '1 second')`;
};

/** The stage a thread ends in: Resolvido when closed, else Aguardando cliente or (sent back) Novo. */
const lastStage = (status: string, ts: string, s: string): string =>
  `case when ${status} = 'closed' then ${s}.s4 when abs(hashint8((extract(epoch from ${ts}) * 1000)::bigint)) % 2 = 0 then ${s}.s3 else ${s}.s1 end`;
const SETUP_SESSION = `set session_replication_role = replica; set synchronous_commit = off; set work_mem = '256MB'`;

/** Workspaces, channels, agents and contacts, and the numbered lists the thread load joins on. */
function smallTables(shape: SeedShape, workspaceId: string): Array<[string, string]> {
  const { workspaces, agentsPerWorkspace: agents, contactsPerWorkspace: contacts } = shape;
  return [
    [
      'workspaces',
      `
      insert into workspaces (id, name, created_at)
      select ${uuid7("now() - interval '400 days'", 'g')}, 'Workspace ' || g, now() - interval '400 days'
        from generate_series(1, ${workspaces - 1}) g;
      insert into channels (workspace_id, id, type, name, created_at)
      select w.id, ${uuid7("now() - interval '400 days'", 'length(v.type)')}, v.type, v.name, now() - interval '400 days'
        from workspaces w cross join (values ('whatsapp', 'WhatsApp'), ('instagram', 'Instagram')) v(type, name)
       where not exists (select 1 from channels c where c.workspace_id = w.id);
      insert into stages (workspace_id, id, name, position, created_at, updated_at)
      select w.id, ${uuid7("now() - interval '400 days'", 'd.position')}, d.name, d.position, now() - interval '400 days', now() - interval '400 days'
        from workspaces w cross join unnest(array[${DEFAULT_STAGES.map((n) => `'${n}'`).join(', ')}]) with ordinality d(name, position)
       where not exists (select 1 from stages s where s.workspace_id = w.id);
      create unlogged table seed_stages as
      select workspace_id, (array_agg(id order by position))[1] as s1, (array_agg(id order by position))[2] as s2,
             (array_agg(id order by position))[3] as s3, (array_agg(id order by position))[4] as s4
        from stages group by workspace_id;
      create unlogged table seed_ws as
      select id, (row_number() over (order by id = '${workspaceId}' desc, id) - 1)::int as wn from workspaces`,
    ],
    [
      'agents, contacts',
      `
      insert into agents (workspace_id, id, name, status, instructions, model, created_at, updated_at)
      select w.id, ${uuid7('x.ts', 'n')}, 'Agente ' || (n + 1),
             case when n % 10 = 9 then 'inactive' else 'active' end,
             'Atenda com cordialidade, responda em português e encaminhe reclamações ao time humano.',
             'gpt-4o-mini', x.ts, x.ts
        from seed_ws w cross join generate_series(0, ${agents - 1}) n
        cross join lateral (select now() - interval '390 days' + n * interval '1 minute' as ts) x;
      insert into contacts (workspace_id, id, name, phone, email, created_at, updated_at)
      select w.id, ${uuid7('x.ts', 'n')}, 'Contato ' || (n + 1),
             '+55119' || lpad(n::text, 8, '0'), 'contato' || n || '@exemplo.com.br', x.ts, x.ts
        from seed_ws w cross join generate_series(0, ${contacts - 1}) n
        cross join lateral (select now() - interval '380 days' + n * interval '1 minute' as ts) x;
      create unlogged table seed_contacts as
      select workspace_id, id, (row_number() over (partition by workspace_id order by created_at, id) - 1)::int as n from contacts;
      create unlogged table seed_channels as
      select workspace_id, id, (row_number() over (partition by workspace_id order by type desc) - 1)::int as n from channels;
      create unlogged table seed_agents as
      select workspace_id, id, (row_number() over (partition by workspace_id order by created_at, id) - 1)::int as n from agents;
      analyze seed_ws; analyze seed_contacts; analyze seed_channels; analyze seed_agents; analyze seed_stages`,
    ],
  ];
}

/**
 * Threads, their history and their messages for the workspaces with wn % parts = part (one
 * session per part). Oldest first, as they would have been written; the newest thread of every
 * (contact, channel) pair is open, the rest closed, ~30% of the closed ones answered NPS two hours
 * after opening; one message per thread, at the thread's last message time. Each thread's history
 * is three stage entries, the funnel's worst case (its indexes hold stage entries only): opened in
 * Novo, moved to Em atendimento, then to its current stage (`lastStage`).
 */
function bigTables(shape: SeedShape, part: number, parts: number, t0: string): Array<[string, string]> {
  const { agentsPerWorkspace: agents, contactsPerWorkspace: contacts, threadsPerWorkspace: threads } = shape;
  const pairs = contacts * 2;
  const npsPercent = Math.round(shape.npsShare * 100);
  const mine = `(select * from seed_ws where wn % ${parts} = ${part})`;
  return [
    [
      'threads',
      `
      insert into threads (workspace_id, id, contact_id, channel_id, agent_id, stage_id, stage_entered_at, status, closed_at,
                           nps_score, nps_created_at, nps_agent_id, nps_stage_id, last_message_at, created_at, updated_at)
      select w.id, ${uuid7('x.ts', 'g')}, c.id, ch.id, y.agent_id, y.stage_id, y.moved, x.status,
             case when x.status = 'closed' then y.moved end,
             case when x.nps then (abs(hashint4(g * 31 + w.wn)) % 11)::smallint end,
             case when x.nps then x.ts + interval '2 hours' end,
             case when x.nps then y.agent_id end,
             case when x.nps then y.stage_id end,
             x.ts, x.ts, greatest(y.moved, case when x.nps then x.ts + interval '2 hours' else x.ts end)
        from generate_series(${threads - 1}, 0, -1) g
        cross join ${mine} w
        cross join lateral (
          select now() - g * (interval '365 days' / ${threads}) as ts,
                 case when g < ${pairs} then 'open' else 'closed' end as status,
                 g >= ${pairs} and abs(hashint4(g * 17 + w.wn)) % 100 < ${npsPercent} as nps
        ) x
        join seed_contacts c on c.workspace_id = w.id and c.n = g % ${contacts}
        join seed_channels ch on ch.workspace_id = w.id and ch.n = (g / ${contacts}) % 2
        join seed_agents a on a.workspace_id = w.id and a.n = (g * 7) % ${agents}
        join seed_stages s on s.workspace_id = w.id
        cross join lateral (
          select case when g % 10 = 3 then null else a.id end as agent_id,
                 ${lastStage('x.status', 'x.ts', 's')} as stage_id,
                 x.ts + ${stay('x.ts', t0, 1)} + ${stay('x.ts', t0, 2)} as moved
        ) y
       order by g desc, w.wn`,
    ],
    [
      'thread_history',
      `
      insert into thread_history (workspace_id, id, thread_id, field, from_id, to_id, stay_ms, actor_type, actor_id, reason, created_at)
      select t.workspace_id, ${uuid7('e.at', 'e.k')}, t.id, 'stageId', e.from_id, e.to_id, e.stay_ms, 'system', null, null, e.at
        from threads t
        join seed_stages s on s.workspace_id = t.workspace_id
        cross join lateral (select ${stay('t.created_at', t0, 1)} as d1, ${stay('t.created_at', t0, 2)} as d2) d
        cross join lateral (values
          (0, null::uuid, s.s1, null::bigint, t.created_at),
          (1, s.s1, s.s2, (extract(epoch from d.d1) * 1000)::bigint, t.created_at + d.d1),
          (2, s.s2, ${lastStage('t.status', 't.created_at', 's')}, (extract(epoch from d.d2) * 1000)::bigint, t.created_at + d.d1 + d.d2)
        ) e(k, from_id, to_id, stay_ms, at)
       where t.workspace_id in (select id from ${mine} w)
       order by e.at, t.workspace_id`,
    ],
    [
      'messages',
      `
      insert into messages (workspace_id, id, thread_id, contact_id, channel_id, direction, content, status, created_at)
      select workspace_id, ${uuid7('last_message_at', '0')}, id, contact_id, channel_id,
             case when random() < 0.5 then 'inbound' else 'outbound' end,
             'Olá! Obrigado pelo contato. Em que posso ajudar hoje?', 'delivered', last_message_at
        from threads
       where workspace_id in (select id from ${mine} w)
       order by last_message_at, workspace_id`,
    ],
  ];
}

/** The share of the table's pages the visibility map marks all-visible (what index-only scans need). */
export async function allVisiblePercent(client: pg.Client, table: string): Promise<number> {
  const { rows } = await client.query<{ percent: number }>(
    `select round(100.0 * relallvisible / greatest(relpages, 1), 1)::float8 as percent from pg_class where oid = $1::regclass`,
    [table],
  );
  return rows[0]!.percent;
}

/** Drops the indexes of `tables` that back no constraint; returns their definitions, to recreate them. */
async function dropSecondaryIndexes(client: pg.Client, tables: string[]): Promise<string[]> {
  const { rows } = await client.query<{ name: string; definition: string }>(
    `select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition
       from pg_index i
      where i.indrelid = any($1::regclass[])
        and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)
      order by 1`,
    [tables],
  );
  for (const row of rows) await client.query(`drop index ${row.name}`);
  return rows.map((row) => row.definition);
}

/**
 * Creates database `name` next to `adminUrl`, migrates it with the service's migrations, provisions
 * the measured workspace with an enterprise key (every scope) and `pro` keys, bulk-loads the rest,
 * and VACUUM ANALYZEs so index-only scans see an all-visible table.
 */
export async function seed(adminUrl: string, name: string, shape: SeedShape, log: (line: string) => void): Promise<Fixture> {
  const timings: Record<string, number> = {};
  const started = performance.now();
  let last = started;
  const step = (label: string): void => {
    const now = performance.now();
    timings[label] = (timings[label] ?? 0) + (now - last) / 1000;
    last = now;
  };

  const admin = await connectClient(adminUrl);
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const databaseUrl = databaseUrlFor(adminUrl, name);
  step('create database');

  const db = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 2 });
  let enterprise;
  const proKeys: string[] = [];
  try {
    await migrateToLatest(db);
    step('migrations');
    enterprise = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench workspace' });
    for (let i = 0; i < shape.proKeys; i++) {
      const key = await provision(db, { plan: 'pro', scopes: [...SCOPES], workspaceId: enterprise.workspaceId });
      proKeys.push(key.apiKey);
    }
    step('provisioning');
  } finally {
    await db.destroy();
  }

  const counts: Record<string, number> = {};
  const client = await connectClient(databaseUrl);
  try {
    // Rows are consistent by construction: skip the per-row foreign-key triggers (superuser only)
    // and wait for no WAL flush; both only for these sessions.
    await client.query(SETUP_SESSION);
    // Secondary indexes are built once after the load (a sort each) instead of row by row.
    const deferred = await dropSecondaryIndexes(client, ['threads', 'messages', 'thread_history']);
    // Every move of the history lies before this instant (see `stay`).
    const t0 = `'${new Date().toISOString()}'::timestamptz`;
    for (const [label, statement] of smallTables(shape, enterprise.workspaceId)) {
      await client.query(statement);
      step(label);
    }
    // The big tables in parallel sessions, a share of the workspaces each (2 cores: 2 sessions).
    const parts = Math.min(LOAD_SESSIONS, shape.workspaces);
    await Promise.all(
      Array.from({ length: parts }, async (_, part) => {
        const session = await connectClient(databaseUrl);
        try {
          await session.query(SETUP_SESSION);
          for (const [, statement] of bigTables(shape, part, parts, t0)) await session.query(statement);
        } finally {
          await session.end();
        }
      }),
    );
    step('threads, history, messages');
    log(`  threads, history and messages loaded (${timings['threads, history, messages']!.toFixed(1)} s)`);
    await client.query(`drop table seed_ws, seed_contacts, seed_channels, seed_agents, seed_stages`);
    await client.query(`reset session_replication_role; set maintenance_work_mem = '256MB'`);
    for (const definition of deferred) await client.query(definition);
    step('indexes');
    // The bulk load bypassed setNpsAnswer, which keeps nps_daily and nps_daily_groups: fill them as
    // migrations 0002 and 0004 do.
    await client.query(NPS_DAILY_BACKFILL);
    await client.query(NPS_DAILY_GROUPS_BACKFILL);
    step('nps rollups');
    for (const table of [
      'threads',
      'thread_history',
      'messages',
      'nps_daily',
      'nps_daily_groups',
      'stages',
      'agents',
      'contacts',
      'channels',
      'api_keys',
      'workspaces',
    ]) {
      await client.query(`vacuum (analyze) ${table}`);
    }
    // VACUUM marks a page all-visible only once no open snapshot predates the load; on a shared
    // server another session's transaction can hold that back, and the planner then prefers a
    // bitmap heap scan to the index-only scans that count every list's total (a bench once measured
    // the agents' count that way). Vacuum the listed tables again until their pages are all-visible.
    for (const table of ['threads', 'thread_history', 'agents', 'contacts']) {
      let visible = await allVisiblePercent(client, table);
      for (let attempt = 0; attempt < 10 && visible < 99; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        await client.query(`vacuum (analyze) ${table}`);
        visible = await allVisiblePercent(client, table);
      }
      if (visible < 99) log(`  warning: only ${visible}% of ${table}' pages are all-visible (an old transaction holds VACUUM back)`);
    }
    const visible = await allVisiblePercent(client, 'threads');
    step('vacuum analyze');

    for (const table of ['workspaces', 'agents', 'contacts', 'threads', 'thread_history', 'messages']) {
      counts[table] = (await client.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0]!.n;
    }
    const answered = await client.query<{ n: number; open: number }>(
      `select count(*) filter (where nps_created_at is not null)::int as n, count(*) filter (where status = 'open')::int as open from threads`,
    );
    counts.npsAnswers = answered.rows[0]!.n;
    counts.npsDailyRows = (await client.query<{ n: number }>(`select count(*)::int as n from nps_daily`)).rows[0]!.n;
    counts.npsDailyGroupRows = (await client.query<{ n: number }>(`select count(*)::int as n from nps_daily_groups`)).rows[0]!.n;
    counts.openThreads = answered.rows[0]!.open;
    const pairs = await client.query<{ contactId: string; channelId: string; threadId: string }>(
      `select contact_id as "contactId", channel_id as "channelId", id as "threadId" from threads
        where workspace_id = $1 and status = 'open' order by contact_id, channel_id`,
      [enterprise.workspaceId],
    );
    const stages = await client.query<{ id: string }>(`select id from stages where workspace_id = $1 order by position`, [enterprise.workspaceId]);
    step('checks');
    timings.total = (performance.now() - started) / 1000;
    return {
      databaseUrl,
      workspaceId: enterprise.workspaceId,
      enterpriseKey: enterprise.apiKey,
      enterpriseKeyId: enterprise.keyId,
      proKeys,
      pairs: pairs.rows.map(({ contactId, channelId }) => ({ contactId, channelId })),
      openThreadIds: pairs.rows.map((row) => row.threadId),
      stageIds: stages.rows.map((row) => row.id),
      counts,
      allVisiblePercent: visible,
      timings,
    };
  } finally {
    await client.end();
  }
}

/** Drops the benchmark database, closing whatever is still connected to it. */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = await connectClient(adminUrl);
  try {
    await admin.query(`drop database if exists ${name} with (force)`);
  } finally {
    await admin.end();
  }
}
