// A thread's one SLA timer (issue 37, sla/timers.ts): one job per thread whatever its clocks, due at
// the earliest warning or due time still to record, which records each moment once within 5 s of it
// and in order, then moves on to the next (the same job); a change made while an instance holds the
// timer is not lost (the holder re-arms from the clocks as they are when it commits); two instances
// with every moment due record each once; a timer failing on every attempt is kept, not dropped; and
// per-time timers left by an older version fold into one.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createWorkspace, type TestWorkspace } from './helpers/api.js';
import { sandboxInbound } from './helpers/automations.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';
import { createLogger } from '../src/logger.js';
import { fireTimer, slaTimerHandler } from '../src/sla/timers.js';
import type { Job } from '../src/jobs/queue.js';

type Schemas = components['schemas'];

const JOBS = { jobPollMs: 200, retryBaseMs: 20 };

let server: TestServer;
let own: OwnDatabase | undefined;

beforeAll(async () => {
  // Its workers take every job of their database: one of its own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: JOBS });
});
afterAll(async () => {
  await server?.close();
  await own?.drop();
});

/** Warnings 5 minutes before a 15-minute first response and a 10-hour resolution: four moments a thread. */
const twoClocks: Schemas['SlaPolicyCreate'] = { name: 'Duas metas', targets: { firstResponseMinutes: 15, resolutionMinutes: 600 }, warnBeforeMinutes: 5 };

async function setUp(phone: string): Promise<{ ws: TestWorkspace; threadId: string; opened: Schemas['Thread'] }> {
  const ws = await createWorkspace(server);
  const day: [string, string][] = [['00:00', '24:00']];
  const settings = await ws.api.PATCH('/settings', {
    body: { timezone: 'UTC', businessHours: { mon: day, tue: day, wed: day, thu: day, fri: day, sat: day, sun: day } },
  });
  expect(settings.response.status).toBe(200);
  expect((await ws.api.POST('/sla-policies', { body: twoClocks })).response.status).toBe(201);
  const { threadId } = await sandboxInbound(ws, 'Oi', phone);
  const { data: opened } = await ws.api.GET('/threads/{id}', { params: { path: { id: threadId } } });
  return { ws, threadId, opened: opened! };
}

interface TimerRow {
  id: string;
  run_at: Date;
  locked_by: string | null;
}

/** The thread's SLA timer jobs. */
async function timers(ws: TestWorkspace, threadId: string): Promise<TimerRow[]> {
  const { rows } = await sql<TimerRow>`
    select id, run_at, locked_by from jobs
     where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`} order by run_at, id`.execute(server.db);
  return rows;
}

/** As if `ms` had passed for the thread's clocks: their due and warning times, and its timer, that much earlier. */
async function travel(ws: TestWorkspace, threadId: string, ms: number): Promise<void> {
  await sql`update sla_clocks set due_at = due_at - ${ms} * interval '1 millisecond', warn_at = warn_at - ${ms} * interval '1 millisecond'
             where workspace_id = ${ws.workspaceId} and thread_id = ${threadId}`.execute(server.db);
  await sql`update jobs set run_at = run_at - ${ms} * interval '1 millisecond'
             where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`}`.execute(server.db);
  await sql`select pg_notify('sf_jobs', 'sla-timer')`.execute(server.db);
}

/** The thread's sla.* events, oldest first: [type, metric, when recorded]. */
async function recorded(ws: TestWorkspace, threadId: string, db = server.db): Promise<Array<[string, string, Date]>> {
  const { rows } = await sql<{ type: string; metric: string; created_at: Date }>`
    select type, metric, created_at from events
     where workspace_id = ${ws.workspaceId} and type in ('sla.warning', 'sla.breached') and data ->> 'id' = ${threadId}
     order by created_at, id`.execute(db);
  return rows.map((row) => [row.type, row.metric, row.created_at]);
}

const kinds = (events: Array<[string, string, Date]>) => events.map(([type, metric]) => [type, metric]);

const IN_ORDER = [
  ['sla.warning', 'firstResponse'],
  ['sla.breached', 'firstResponse'],
  ['sla.warning', 'resolution'],
  ['sla.breached', 'resolution'],
];

describe('a thread with a warning and a breach of two clocks', () => {
  it('when its four moments come one after another, then it has one timer job throughout, which records each once within 5 s of its moment, in order, and ends after the last', async () => {
    const { ws, threadId, opened } = await setUp('+5511911116001');
    const created = Date.parse(opened.createdAt);
    const [timer] = await timers(ws, threadId);
    expect(await timers(ws, threadId)).toEqual([{ id: timer!.id, run_at: new Date(created + 10 * 60_000), locked_by: null }]);

    const moments: number[] = [];
    for (let step = 1; step <= 4; step++) {
      const [waiting, ...others] = await timers(ws, threadId);
      expect(others).toEqual([]);
      expect(waiting!.id).toBe(timer!.id);
      // Its moment a second from now.
      await travel(ws, threadId, waiting!.run_at.getTime() - Date.now() - 1_000);
      const [moved] = await timers(ws, threadId);
      moments.push(moved!.run_at.getTime());
      await waitFor(`moment ${step}`, async () => (await recorded(ws, threadId)).length === step, 8_000);
      const events = await recorded(ws, threadId);
      expect(kinds(events)).toEqual(IN_ORDER.slice(0, step));
      const at = events[step - 1]![2].getTime();
      expect(at).toBeGreaterThanOrEqual(moments[step - 1]!);
      expect(at - moments[step - 1]!).toBeLessThanOrEqual(5_000);
      // Re-armed at the next moment (the same job), or ended after the last.
      await waitFor('the timer re-armed or ended', async () => {
        const rows = await timers(ws, threadId);
        return step === 4 ? rows.length === 0 : rows.length === 1 && rows[0]!.locked_by === null && rows[0]!.run_at.getTime() > Date.now();
      });
    }
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: threadId } } })).data!.sla).toMatchObject({
      status: 'breached',
      breached: ['firstResponse', 'resolution'],
    });
  });

  it('when all four moments are past at once, then one run records each once, oldest first, and the timer ends', async () => {
    const { ws, threadId } = await setUp('+5511911116002');
    await travel(ws, threadId, 601 * 60_000);
    await waitFor('the timer ended', async () => (await timers(ws, threadId)).length === 0, 5_000);
    expect(kinds(await recorded(ws, threadId))).toEqual(IN_ORDER);
  });
});

describe('a change while an instance holds the timer', () => {
  it('when an answer and a shorter target move the clocks while the timer is held, then the held job is moved (no second one), and its run re-arms it from the clocks as they are', async () => {
    const { ws, threadId, opened } = await setUp('+5511911116003');
    const created = Date.parse(opened.createdAt);
    // Held by an instance (claimed; the workers here pass over it until its lease runs out).
    const { rows } = await sql<Job<'sla-timer'>>`
      update jobs set locked_by = 'another-instance', locked_until = now() + interval '1 hour', attempts = attempts + 1
       where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`} returning *`.execute(server.db);
    const held = rows[0]!;

    // The answer stops the first-response clock: the timer moves to the resolution warning, held as it is.
    const answer = await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    expect(answer.response.status).toBe(201);
    expect(await timers(ws, threadId)).toEqual([{ id: held.id, run_at: new Date(created + 595 * 60_000), locked_by: 'another-instance' }]);

    // The holder's run, after the change committed: nothing due, re-armed where the clocks say, released.
    await fireTimer(server.db, held);
    expect(await timers(ws, threadId)).toEqual([{ id: held.id, run_at: new Date(created + 595 * 60_000), locked_by: null }]);
    expect(await recorded(ws, threadId)).toEqual([]);

    // Held again while the resolution target is shortened to 6 minutes (warning at 1): the held job moves earlier.
    await sql`update jobs set locked_by = 'another-instance', locked_until = now() + interval '1 hour' where id = ${held.id}`.execute(server.db);
    const { data: policies } = await ws.api.GET('/sla-policies');
    const shorter = await ws.api.PATCH('/sla-policies/{id}', {
      params: { path: { id: policies!.data[0]!.id } },
      body: { targets: { firstResponseMinutes: 15, resolutionMinutes: 6 } },
    });
    expect(shorter.response.status).toBe(200);
    expect(await timers(ws, threadId)).toEqual([{ id: held.id, run_at: new Date(created + 60_000), locked_by: 'another-instance' }]);

    // The holder dies (its lease runs out) with the warning past: another run records it once, and re-arms at the breach.
    if (Date.now() < created + 60_000) await travel(ws, threadId, created + 60_000 - Date.now());
    await sql`update jobs set locked_until = now() - interval '1 second' where id = ${held.id}`.execute(server.db);
    await sql`select pg_notify('sf_jobs', 'sla-timer')`.execute(server.db);
    await waitFor('the warning', async () => (await recorded(ws, threadId)).length === 1, 5_000);
    expect(kinds(await recorded(ws, threadId))).toEqual([['sla.warning', 'resolution']]);
    await waitFor('the timer re-armed', async () => (await timers(ws, threadId))[0]?.locked_by === null);
    const [rearmed, ...others] = await timers(ws, threadId);
    expect(others).toEqual([]);
    const clock = await server.db
      .selectFrom('sla_clocks')
      .selectAll()
      .where('thread_id', '=', threadId)
      .where('metric', '=', 'resolution')
      .executeTakeFirstOrThrow();
    expect(rearmed).toEqual({ id: held.id, run_at: clock.due_at, locked_by: null });
  });
});

describe('a timer that fails on every attempt', () => {
  it('when its last attempt failed, then it is kept (it stands for every moment to come), to start again a minute later with its attempts reset', async () => {
    const { ws, threadId } = await setUp('+5511911116006');
    const { rows } = await sql<Job<'sla-timer'>>`
      update jobs set locked_by = 'this-instance', locked_until = now() + interval '1 hour', attempts = 10
       where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`} returning *`.execute(server.db);
    const failing = rows[0]!;
    const before = Date.now();
    await slaTimerHandler({ db: server.db, logger: createLogger('silent'), retryBaseMs: 20 }).giveUp(failing, 'the database went away');
    const kept = await server.db.selectFrom('jobs').selectAll().where('id', '=', failing.id).executeTakeFirstOrThrow();
    expect(kept).toMatchObject({ locked_by: null, locked_until: null, attempts: 0, last_error: 'the database went away' });
    expect(kept.run_at.getTime()).toBeGreaterThanOrEqual(before + 59_000);
    expect(kept.run_at.getTime()).toBeLessThanOrEqual(Date.now() + 61_000);
  });
});

describe('more than one instance', () => {
  it('when two instances run the timers and every moment of a thread is past, then each warning and breach is recorded once', async () => {
    const second = await startServer({ databaseUrl: own?.url, jobs: true, config: JOBS });
    try {
      const { ws, threadId } = await setUp('+5511911116004');
      await travel(ws, threadId, 601 * 60_000);
      await waitFor('the timer ended', async () => (await timers(ws, threadId)).length === 0, 5_000);
      expect(kinds(await recorded(ws, threadId))).toEqual(IN_ORDER);
    } finally {
      await second.close();
    }
  });

  it('when a thread has timers left by an older version (one per due and warning time), then the first to run records what is due and leaves one timer, at the next moment', async () => {
    const { ws, threadId, opened } = await setUp('+5511911116005');
    const created = Date.parse(opened.createdAt);
    const [timer] = await timers(ws, threadId);
    // As the older version wrote them: the first-response warning (as the thread's timer), and the three others beside it.
    await sql`update jobs set payload = payload || '{"metric": "firstResponse", "kind": "warning"}' where id = ${timer!.id}`.execute(server.db);
    await sql`insert into jobs (workspace_id, id, queue, ordering_key, payload, run_at, created_at)
              select ${ws.workspaceId}::uuid, gen_random_uuid(), 'sla-timer', ${`sla:${threadId}`},
                     jsonb_build_object('threadId', ${threadId}::text, 'metric', t.metric, 'kind', t.kind), t.at, t.at
                from (values ('firstResponse', 'breach', ${new Date(created + 15 * 60_000)}::timestamptz),
                             ('resolution', 'warning', ${new Date(created + 595 * 60_000)}::timestamptz),
                             ('resolution', 'breach', ${new Date(created + 600 * 60_000)}::timestamptz)) as t (metric, kind, at)`.execute(server.db);
    expect(await timers(ws, threadId)).toHaveLength(4);

    await travel(ws, threadId, 10 * 60_000);
    await waitFor('the warning', async () => (await recorded(ws, threadId)).length === 1, 5_000);
    await waitFor('one timer left', async () => (await timers(ws, threadId)).length === 1 && (await timers(ws, threadId))[0]!.locked_by === null, 5_000);
    const [left] = await timers(ws, threadId);
    expect(left!.run_at).toEqual(new Date(created + 5 * 60_000));
    expect(kinds(await recorded(ws, threadId))).toEqual([['sla.warning', 'firstResponse']]);
  });
});
