// Threads of a workspace: at most one open per (contact, channel), their stage and history of
// changes, and their NPS answers.
import { CompiledQuery, sql, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import { NO_AGENT, type ThreadRow, type ThreadSla } from './schema.js';
import type { Actor } from '../actor.js';
import { historyRows, type FieldChange } from './history.js';
import { hasLabels, labelKeys } from './labels.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';
import { instantToIso, wholeUtcDays } from '../time.js';

export type Thread = components['schemas']['Thread'];

export interface ThreadFilter {
  status?: Thread['status'] | undefined;
  contactId?: string | undefined;
  channelId?: string | undefined;
  agentId?: string | undefined;
  stageId?: string | undefined;
  /** Every one of these labels (case-insensitive). */
  labels?: readonly string[] | undefined;
}

export function threadRowToThread(row: ThreadRow): Thread {
  return {
    id: row.id,
    contactId: row.contact_id,
    channelId: row.channel_id,
    agentId: row.agent_id,
    stageId: row.stage_id,
    status: row.status,
    closedAt: row.closed_at?.toISOString() ?? null,
    npsScore: row.nps_score,
    npsCreatedAt: row.nps_created_at?.toISOString() ?? null,
    npsRequestedAt: row.nps_requested_at?.toISOString() ?? null,
    lastMessageAt: row.last_message_at?.toISOString() ?? null,
    lastInboundAt: row.last_inbound_at?.toISOString() ?? null,
    labels: row.labels,
    sla: row.sla ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const threadList = listSource<Thread>('threads', {
  id: 'id',
  contactId: 'contact_id',
  channelId: 'channel_id',
  agentId: 'agent_id',
  stageId: 'stage_id',
  status: 'status',
  closedAt: { instant: 'closed_at' },
  npsScore: 'nps_score',
  npsCreatedAt: { instant: 'nps_created_at' },
  npsRequestedAt: { instant: 'nps_requested_at' },
  lastMessageAt: { instant: 'last_message_at' },
  lastInboundAt: { instant: 'last_inbound_at' },
  labels: 'labels',
  sla: 'sla',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

export async function listThreads(db: Db, workspaceId: string, filter: ThreadFilter, page: number, limit: number): Promise<PageText<Thread>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (filter.status) where.push(['status = ?', filter.status]);
  if (filter.contactId) where.push(['contact_id = ?', filter.contactId]);
  if (filter.channelId) where.push(['channel_id = ?', filter.channelId]);
  if (filter.agentId) where.push(['agent_id = ?', filter.agentId]);
  if (filter.stageId) where.push(['stage_id = ?', filter.stageId]);
  if (filter.labels?.length) where.push(hasLabels(workspaceId, filter.labels));
  // A label's matches come from its GIN index first (pagination.ts says why).
  return listPage(db, threadList, where, { page, limit, newestFirst: true, matchesFirst: Boolean(filter.labels?.length) });
}

export async function getThread(db: Db, workspaceId: string, id: string): Promise<Thread | undefined> {
  const row = await db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row && threadRowToThread(row);
}

export async function threadExists(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const row = await db.selectFrom('threads').select('id').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row !== undefined;
}

export interface OpenThreadInput {
  contactId: string;
  channelId: string;
  /** The channel's default agent (if any) when left out. */
  agentId?: string | undefined;
  /** Set when the thread opens with a message. */
  lastMessageAt?: Date | undefined;
  /** Kept as services/labels.ts keeps them. */
  labels?: readonly string[] | undefined;
}

/** Fixed text (prepared once per connection, compiled never): every new customer's first message runs it. */
const INSERT_OPEN_THREAD = `
    with opened as (
      insert into threads (workspace_id, id, contact_id, channel_id, agent_id, stage_id, stage_entered_at, status, last_message_at, labels, label_keys,
                           sla, created_at, updated_at)
      select $1::uuid, $2::uuid, c.id, $3::uuid, coalesce($4::uuid, ch.default_agent_id),
             (select s.id from stages s where s.workspace_id = $1::uuid order by s.position limit 1),
             $5::timestamptz, 'open', $6::timestamptz, $7::text[], $8::text[], $16::jsonb, $5::timestamptz, $5::timestamptz
        from contacts c
        left join channels ch on ch.workspace_id = $1::uuid and ch.id = $3::uuid
       where c.workspace_id = $1::uuid and c.id = $9::uuid and c.erased_at is null
      -- A literal, not a parameter: a prepared statement's generic plan cannot match a parameter to
      -- the partial index's where status = 'open'.
      on conflict (workspace_id, contact_id, channel_id) where status = 'open' do nothing
      returning *
    ), recorded as (
      insert into thread_history (workspace_id, id, thread_id, field, to_status, to_id, to_labels, actor_type, actor_id, reason, created_at)
      select o.workspace_id, e.id, o.id, e.field, e.to_status, e.to_id, e.to_labels, e.actor_type, e.actor_id, e.reason, o.created_at
        from opened o
       cross join lateral (values
         ($10::uuid, 'status', 'open', null::uuid, null::jsonb, $14::text, $15::uuid, null::text),
         ($11::uuid, 'stageId', null, o.stage_id, null, $14::text, $15::uuid, null),
         ($12::uuid, 'agentId', null, o.agent_id, null,
          case when $4::uuid is null then 'system' else $14::text end,
          case when $4::uuid is null then null else $15::uuid end,
          case when $4::uuid is null then 'channel_default_agent' end),
         ($13::uuid, 'labels', null, null, to_jsonb(o.labels), $14::text, $15::uuid, null)
       ) e(id, field, to_status, to_id, to_labels, actor_type, actor_id, reason)
       where (e.field <> 'agentId' or e.to_id is not null) and (e.field <> 'labels' or cardinality(o.labels) > 0)
    )
    select * from opened`;

/**
 * Opens a thread for the pair in the workspace's first stage, assigned to the given agent or else
 * to the channel's default agent, and records its opening values in its history (the default agent
 * by the system; its labels when it has some), in one statement. Undefined when the pair already has an open thread (the
 * partial unique index decides, so concurrent callers cannot both open one) or when the contact
 * does not exist (or was erased): the caller tells which. A channel or agent missing from the
 * workspace fails its composite foreign key (mapped to 422). Its thread.created is the caller's
 * (services/threads.ts openThread). `stored`: its id and its `sla` when the caller knows them before
 * it exists (the `sla` is then written with the row, not by a second version of it).
 */
export async function insertOpenThread(
  db: Db,
  workspaceId: string,
  input: OpenThreadInput,
  now: Date,
  actor: Actor,
  stored: { id?: string; sla?: ThreadSla | null } = {},
): Promise<ThreadRow | undefined> {
  const agentId = input.agentId ?? null;
  const labels = [...(input.labels ?? [])];
  const sla = stored.sla ?? null;
  const { rows } = await db.executeQuery<ThreadRow>(
    CompiledQuery.raw(INSERT_OPEN_THREAD, [
      workspaceId,
      stored.id ?? uuidv7(),
      input.channelId,
      agentId,
      now,
      input.lastMessageAt ?? null,
      labels,
      labelKeys(workspaceId, labels),
      input.contactId,
      // The history entries' ids: status, stage, agent, labels.
      uuidv7(),
      uuidv7(),
      uuidv7(),
      uuidv7(),
      actor.type,
      actor.id,
      sla && JSON.stringify(sla),
    ]),
  );
  return rows[0];
}

/** True when the workspace has this contact and it was not erased. */
export async function contactIsLive(db: Db, workspaceId: string, contactId: string): Promise<boolean> {
  const row = await db
    .selectFrom('contacts')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', contactId)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
  return row !== undefined;
}

/** A thread as read for a change: its row and its row version (xmin), which the write checks. */
export interface VersionedThread {
  row: ThreadRow;
  version: string;
}

/** With `lock`, the row stays locked until the caller's transaction ends (locking leaves xmin as it is). */
export async function readThreadForChange(db: Db, workspaceId: string, id: string, options: { lock?: boolean } = {}): Promise<VersionedThread | undefined> {
  const query = db
    .selectFrom('threads')
    .selectAll()
    .select(sql<string>`xmin::text`.as('version'))
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id);
  const row = await (options.lock ? query.forUpdate() : query).executeTakeFirst();
  if (!row) return undefined;
  const { version, ...thread } = row;
  return { row: thread, version };
}

/**
 * Writes the planned columns of a thread and their history rows in one statement, only if the
 * thread is still the version that was read (its xmin): under a concurrent change, PostgreSQL
 * rechecks the condition on the committed new version, nothing is written and the answer is
 * undefined, so the caller reads again and replans. Reopening while the pair has another open
 * thread fails the partial unique index (23505, threads_one_open_per_pair_key); a stage or agent
 * missing from the workspace fails its composite foreign key (23503).
 */
export async function writeThreadChange(
  db: Db,
  workspaceId: string,
  read: VersionedThread,
  set: ThreadColumns,
  changes: readonly FieldChange[],
  who: { actor: Actor; reason: string | null },
  now: Date,
): Promise<ThreadRow | undefined> {
  const values: ThreadColumns & { label_keys?: string[] } = { ...set, ...(set.labels && { label_keys: labelKeys(workspaceId, set.labels) }) };
  const columns = CHANGED_COLUMNS.filter((column) => values[column] !== undefined);
  const entries = historyRows(workspaceId, read.row.id, changes, who, now).flatMap((h) => [
    h.id,
    h.field,
    h.from_status,
    h.to_status,
    h.from_id,
    h.to_id,
    h.from_labels,
    h.to_labels,
    h.stay_ms,
    h.actor_type,
    h.actor_id,
    h.reason,
  ]);
  const { rows } = await db.executeQuery<ThreadRow>(
    CompiledQuery.raw(threadChangeText(columns, changes.length), [
      workspaceId,
      read.row.id,
      read.version,
      now,
      ...columns.map((column) => values[column]),
      ...entries,
    ]),
  );
  return rows[0];
}

/** The columns a change sets. */
type ThreadColumns = Partial<Pick<ThreadRow, 'status' | 'closed_at' | 'stage_id' | 'stage_entered_at' | 'agent_id' | 'labels'>>;

/** The columns a change may set (label_keys with labels), in the order its statement sets them. */
const CHANGED_COLUMNS = ['status', 'closed_at', 'stage_id', 'stage_entered_at', 'agent_id', 'labels', 'label_keys'] as const;

/** The values of a history row, as threadChangeText's VALUES list takes them. */
const HISTORY_VALUES = ['uuid', '', '', '', 'uuid', 'uuid', 'jsonb', 'jsonb', 'bigint', '', 'uuid', 'text'];

const changeTexts = new Map<string, string>();

/**
 * The text of a change setting `columns` with `entries` history rows: $1 the workspace, $2 the
 * thread, $3 the version read, $4 the instant, then the columns' values, then the rows' (12 each).
 * Built once per shape, and the shapes are few (subsets of seven columns, at most one history row per
 * field): Kysely compiled it on every change, 38% of the CPU a matching automation's stage move and
 * label spent writing (BENCHMARKS.md, issue 34).
 */
function threadChangeText(columns: readonly (typeof CHANGED_COLUMNS)[number][], entries: number): string {
  const shape = `${columns.join(',')}|${entries}`;
  let text = changeTexts.get(shape);
  if (text === undefined) {
    const assignments = columns.map((column, i) => `"${column}" = $${5 + i}, `).join('');
    const first = 5 + columns.length;
    const rows = Array.from({ length: entries }, (_, row) => {
      const at = first + row * HISTORY_VALUES.length;
      return `(${HISTORY_VALUES.map((type, i) => `$${at + i}${type && `::${type}`}`).join(', ')})`;
    });
    text = `with "changed" as (
        update "threads" set ${assignments}"updated_at" = $4
         where "workspace_id" = $1 and "id" = $2 and xmin = $3::xid
        returning *
      ), "recorded" as (
        insert into "thread_history" ("workspace_id", "id", "thread_id", "field", "from_status", "to_status", "from_id", "to_id", "from_labels", "to_labels",
                                      "stay_ms", "actor_type", "actor_id", "reason", "created_at")
        select c.workspace_id, v.id, c.id, v.field, v.from_status, v.to_status, v.from_id, v.to_id, v.from_labels, v.to_labels, v.stay_ms, v.actor_type,
               v.actor_id, v.reason, $4::timestamptz
          from changed c
         cross join (values ${rows.join(', ')}) v(id, field, from_status, to_status, from_id, to_id, from_labels, to_labels, stay_ms, actor_type, actor_id, reason)
      )
      select * from "changed"`;
    changeTexts.set(shape, text);
  }
  return text;
}

export async function findOpenThreadId(db: Db, workspaceId: string, contactId: string, channelId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('threads')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('contact_id', '=', contactId)
    .where('channel_id', '=', channelId)
    .where('status', '=', 'open')
    .executeTakeFirst();
  return row?.id;
}

/** A message from the contact joined the thread: lastMessageAt moves to `at`, lastInboundAt to `inboundAt`. */
export async function recordInbound(db: Db, workspaceId: string, threadId: string, at: Date, inboundAt: Date): Promise<void> {
  await sql`
    update threads
       set last_message_at = greatest(last_message_at, ${at}::timestamptz),
           last_inbound_at = greatest(last_inbound_at, ${inboundAt}::timestamptz),
           updated_at = ${at}::timestamptz
     where workspace_id = ${workspaceId} and id = ${threadId}`.execute(db);
}

/**
 * Records the thread's NPS answer, with the thread's agent and stage at this moment, and counts it
 * in its UTC day of nps_daily and of nps_daily_groups (by channel, agent and stage) in the same
 * statement (data-modifying CTEs), so the rollups stay exact under concurrent answers: only an
 * unanswered thread matches, and an answer and its groups never change afterwards. Undefined when
 * the thread is unknown or already answered.
 *
 * This is the only write of nps_score/nps_created_at, and the API deletes no thread: threads go
 * only by the cascades of deleting their contact, channel or workspace, which the API does not
 * offer (a workspace's nps_daily rows cascade with it). A new path that writes answers or deletes
 * answered threads must update nps_daily in the same statement or transaction.
 */
export async function setNpsAnswer(db: Db, workspaceId: string, id: string, score: number, answeredAt: Date): Promise<Thread | undefined> {
  const row = await db
    .with('answered', (qb) =>
      qb
        .updateTable('threads')
        .set((eb) => ({
          nps_score: score,
          nps_created_at: answeredAt,
          nps_agent_id: eb.ref('agent_id'),
          nps_stage_id: eb.ref('stage_id'),
          updated_at: new Date(),
        }))
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .where('nps_score', 'is', null)
        .returningAll(),
    )
    .with('counted', (qb) =>
      qb
        .insertInto('nps_daily')
        .columns(['workspace_id', 'day', 'promotores', 'neutros', 'detratores'])
        .expression((eb) =>
          eb
            .selectFrom('answered')
            .select([
              'workspace_id',
              sql<string>`(nps_created_at at time zone 'UTC')::date`.as('day'),
              sql<number>`(nps_score >= 9)::int`.as('promotores'),
              sql<number>`(nps_score between 7 and 8)::int`.as('neutros'),
              sql<number>`(nps_score <= 6)::int`.as('detratores'),
            ]),
        )
        .onConflict((oc) =>
          oc.columns(['workspace_id', 'day']).doUpdateSet((eb) => ({
            promotores: eb('nps_daily.promotores', '+', eb.ref('excluded.promotores')),
            neutros: eb('nps_daily.neutros', '+', eb.ref('excluded.neutros')),
            detratores: eb('nps_daily.detratores', '+', eb.ref('excluded.detratores')),
          })),
        ),
    )
    .with('grouped', (qb) =>
      qb
        .insertInto('nps_daily_groups')
        .columns(['workspace_id', 'dimension', 'day', 'key', 'promotores', 'neutros', 'detratores'])
        .expression(
          sql`select a.workspace_id, g.dimension, (a.nps_created_at at time zone 'UTC')::date, g.key,
                     (a.nps_score >= 9)::int, (a.nps_score between 7 and 8)::int, (a.nps_score <= 6)::int
                from answered a
               cross join lateral (values ('channel', a.channel_id), ('agent', coalesce(a.nps_agent_id, ${NO_AGENT}::uuid)),
                                          ('stage', a.nps_stage_id)) g(dimension, key)`,
        )
        .onConflict((oc) =>
          oc.columns(['workspace_id', 'dimension', 'day', 'key']).doUpdateSet((eb) => ({
            promotores: eb('nps_daily_groups.promotores', '+', eb.ref('excluded.promotores')),
            neutros: eb('nps_daily_groups.neutros', '+', eb.ref('excluded.neutros')),
            detratores: eb('nps_daily_groups.detratores', '+', eb.ref('excluded.detratores')),
          })),
        ),
    )
    .selectFrom('answered')
    .selectAll()
    .executeTakeFirst();
  return row && threadRowToThread(row);
}

/** The thread's NPS question was sent at `now`: its request is pending from then (a statement; it returns the thread). */
export async function setNpsRequested(db: Db, workspaceId: string, id: string, now: Date): Promise<ThreadRow> {
  return db
    .updateTable('threads')
    .set({ nps_requested_at: now, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The pair's thread whose NPS question was sent last and is not answered (threads_nps_pending_idx),
 * locked until the caller's transaction ends, so concurrent scores take their turns: the second one
 * reads the thread as the first left it (answered: no row). Whether it expired is the caller's to judge.
 */
export async function lockLatestNpsRequest(db: Db, workspaceId: string, contactId: string, channelId: string): Promise<ThreadRow | undefined> {
  return db
    .selectFrom('threads')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('contact_id', '=', contactId)
    .where('channel_id', '=', channelId)
    .where('nps_requested_at', 'is not', null)
    .where('nps_score', 'is', null)
    .orderBy('nps_requested_at', 'desc')
    .limit(1)
    .forUpdate()
    .executeTakeFirst();
}

export interface NpsCounts {
  promotores: number;
  neutros: number;
  detratores: number;
}

const tally = sql`count(*) filter (where nps_score >= 9)::int as promotores,
  count(*) filter (where nps_score between 7 and 8)::int as neutros,
  count(*) filter (where nps_score <= 6)::int as detratores`;

/**
 * Counts the answers with from <= nps_created_at <= to (instants in microseconds since the epoch,
 * as parseInstant reads them), in one statement. When whole UTC days lie inside the window it sums
 * them from nps_daily (one row a day) and counts only the two partial edge days from
 * threads_nps_idx; otherwise it counts from threads_nps_idx alone (one index-only scan).
 */
export async function countNpsAnswers(db: Db, workspaceId: string, fromInstant: bigint, toInstant: bigint): Promise<NpsCounts> {
  const [lower, upper] = [instantToIso(fromInstant), instantToIso(toInstant)];
  const days = wholeUtcDays(fromInstant, toInstant);
  if (!days) {
    const result = await sql<NpsCounts>`
      select ${tally}
        from threads
       where workspace_id = ${workspaceId}
         and nps_created_at >= ${lower}::timestamptz
         and nps_created_at <= ${upper}::timestamptz`.execute(db);
    return result.rows[0]!;
  }
  const result = await sql<NpsCounts>`
    select sum(promotores)::int as promotores, sum(neutros)::int as neutros, sum(detratores)::int as detratores
      from (select promotores, neutros, detratores
              from nps_daily
             where workspace_id = ${workspaceId}
               and day >= ${days.first}::date
               and day < ${days.end}::date
            union all
            select ${tally}
              from threads
             where workspace_id = ${workspaceId}
               and nps_created_at >= ${lower}::timestamptz
               and nps_created_at < ${days.firstStart}::timestamptz
            union all
            select ${tally}
              from threads
             where workspace_id = ${workspaceId}
               and nps_created_at >= ${days.endStart}::timestamptz
               and nps_created_at <= ${upper}::timestamptz) parts`.execute(db);
  return result.rows[0]!;
}

/** What goes with a thread's `sla` in its statement (setThreadSla). */
export interface AlongSla {
  /** Data-modifying WITH queries (`name as (...)`) of the caller's own tables, or of an owner's statement builders. */
  with: readonly RawBuilder<unknown>[];
  /** A scalar expression evaluated once after them (a NOTIFY of the jobs they added). */
  select?: RawBuilder<unknown> | undefined;
}

/**
 * Writes the thread's `sla` as the API shows it (src/sla/ computes it), and answers the thread as it
 * is now. `along`: what changes with it in the same statement (src/sla/'s clocks, metrics and timers).
 */
export async function setThreadSla(trx: Db, workspaceId: string, threadId: string, sla: ThreadSla | null, along?: AlongSla): Promise<ThreadRow> {
  if (!along || (along.with.length === 0 && !along.select)) {
    return trx
      .updateTable('threads')
      .set({ sla: sla && JSON.stringify(sla) })
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', threadId)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  const changed = sql`thread_sla as (
      update threads set sla = ${sla && JSON.stringify(sla)}::jsonb where workspace_id = ${workspaceId} and id = ${threadId} returning *)`;
  const { rows } = await sql<ThreadRow & { along_select?: unknown }>`
    with ${sql.join([...along.with, changed])}
    select thread_sla.*${along.select ? sql`, ${along.select} as along_select` : sql``} from thread_sla`.execute(trx);
  if (!rows[0]) throw new Error(`setThreadSla: no thread ${threadId}`);
  const { along_select: _select, ...row } = rows[0];
  return row;
}
