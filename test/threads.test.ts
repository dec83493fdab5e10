// Threads: list (order, filters, pagination), get, open (one open thread per pair) and the NPS answer.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Thread = components['schemas']['Thread'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function createContact(ws: TestWorkspace): Promise<string> {
  const { data } = await ws.api.POST('/contacts', { body: buildContact() });
  return data!.id;
}

async function createAgent(ws: TestWorkspace): Promise<string> {
  const { data } = await ws.api.POST('/agents', { body: buildAgent() });
  return data!.id;
}

async function openThread(ws: TestWorkspace, body: components['schemas']['ThreadCreate']): Promise<Thread> {
  const { data, response } = await ws.api.POST('/threads', { body });
  expect(response.status).toBe(201);
  return data!;
}

/** Opens `count` threads on the first channel, each with a contact of its own, one after another. */
async function openThreads(ws: TestWorkspace, count: number): Promise<Thread[]> {
  const threads: Thread[] = [];
  for (let i = 0; i < count; i++) threads.push(await openThread(ws, { contactId: await createContact(ws), channelId: ws.channels[0]!.id }));
  return threads;
}

const newestFirst = (a: Thread, b: Thread): number => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1);

const storedThreads = (workspaceId: string) =>
  server.db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();

async function closeThread(ws: TestWorkspace, id: string): Promise<Thread> {
  const { data, response } = await ws.api.PATCH('/threads/{id}', { params: { path: { id } }, body: { status: 'closed' } });
  expect(response.status).toBe(200);
  return data!;
}

/** The id of the workspace's first stage, which new threads enter. */
async function firstStageId(ws: TestWorkspace): Promise<string> {
  const { data } = await ws.api.GET('/stages');
  return data!.data[0]!.id;
}

/** created_at is insert-only for the application; tests move it to arrange an order. */
const setCreatedAt = (ws: TestWorkspace, id: string, at: string) =>
  sql`update threads set created_at = ${at}::timestamptz where workspace_id = ${ws.workspaceId} and id = ${id}`.execute(server.db);

/** `date` written in another offset (minutes east of UTC), e.g. -180 -> 2026-03-10T09:15:30.250-03:00. */
function withOffset(date: Date, offsetMinutes: number): string {
  const local = new Date(date.getTime() + offsetMinutes * 60_000).toISOString().slice(0, -1);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

describe('GET /threads', () => {
  it('when the workspace has threads, then it lists them newest first with the default page', async () => {
    const ws = await createWorkspace(server);
    const threads = await openThreads(ws, 3);

    const { data, response } = await ws.api.GET('/threads');

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [...threads].sort(newestFirst), pagination: { total: 3, page: 1, limit: 20 } });
    expect(data!.data.map((t) => t.id)).toEqual(threads.map((t) => t.id).reverse());
  });

  it('when createdAt differs from the order of creation or ties, then it orders by createdAt desc and then id desc', async () => {
    const ws = await createWorkspace(server);
    const [t1, t2, t3] = (await openThreads(ws, 3)) as [Thread, Thread, Thread];
    await setCreatedAt(ws, t1.id, '2026-06-03T12:00:00.000Z');
    await setCreatedAt(ws, t2.id, '2026-06-01T12:00:00.000Z');
    await setCreatedAt(ws, t3.id, '2026-06-01T12:00:00.000Z');

    const { data } = await ws.api.GET('/threads');

    expect(data).toEqual({
      data: [
        { ...t1, createdAt: '2026-06-03T12:00:00.000Z' },
        { ...t3, createdAt: '2026-06-01T12:00:00.000Z' },
        { ...t2, createdAt: '2026-06-01T12:00:00.000Z' },
      ],
      pagination: { total: 3, page: 1, limit: 20 },
    });
  });

  // Lists are written as JSON by PostgreSQL, single reads by the service: both must read alike.
  it('when fields are null, numbers or timestamps with microseconds, then each listed thread equals its GET', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const assigned = await openThread(ws, { contactId, channelId: ws.channels[0]!.id, agentId: await createAgent(ws) });
    const bare = await openThread(ws, { contactId, channelId: ws.channels[1]!.id });
    await sql`update threads set nps_score = 0, nps_created_at = '2026-03-01 10:00:00.000999+00', nps_stage_id = stage_id,
                                 last_message_at = '2026-03-01 09:59:59.999999+00', status = 'closed', closed_at = '2026-03-02 08:00:00.000999+00'
               where id = ${assigned.id}`.execute(server.db);

    const { data } = await ws.api.GET('/threads');
    const singles = await Promise.all([bare, assigned].map(async (t) => (await ws.api.GET('/threads/{id}', { params: { path: { id: t.id } } })).data));

    expect(singles[0]).toMatchObject({ agentId: null, closedAt: null, npsScore: null, npsCreatedAt: null, lastMessageAt: null });
    expect(singles[1]).toMatchObject({
      npsScore: 0,
      npsCreatedAt: '2026-03-01T10:00:00.000Z',
      lastMessageAt: '2026-03-01T09:59:59.999Z',
      closedAt: '2026-03-02T08:00:00.000Z',
    });
    expect(data).toEqual({ data: singles, pagination: { total: 2, page: 1, limit: 20 } });
  });

  it('when the workspace has no threads, then it answers an empty page with total 0', async () => {
    const ws = await createWorkspace(server);

    const { data } = await ws.api.GET('/threads');

    expect(data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  it('when filtered by status, then only threads in that status are listed', async () => {
    const ws = await createWorkspace(server);
    const [open, toClose] = (await openThreads(ws, 2)) as [Thread, Thread];
    const closed = await closeThread(ws, toClose.id);

    const { data: openOnes } = await ws.api.GET('/threads', { params: { query: { status: 'open' } } });
    const { data: closedOnes } = await ws.api.GET('/threads', { params: { query: { status: 'closed' } } });

    expect(openOnes).toEqual({ data: [open], pagination: { total: 1, page: 1, limit: 20 } });
    expect(closed).toEqual({ ...toClose, status: 'closed', closedAt: expect.stringMatching(ISO_MS), updatedAt: closed.closedAt });
    expect(closedOnes).toEqual({ data: [closed], pagination: { total: 1, page: 1, limit: 20 } });
  });

  describe('with threads of two contacts on two channels, one of them assigned', () => {
    async function arrange() {
      const ws = await createWorkspace(server);
      const [c1, c2] = [await createContact(ws), await createContact(ws)];
      const [ch1, ch2] = [ws.channels[0]!.id, ws.channels[1]!.id];
      const agentId = await createAgent(ws);
      const c1ch1 = await openThread(ws, { contactId: c1, channelId: ch1, agentId });
      const c1ch2 = await openThread(ws, { contactId: c1, channelId: ch2 });
      const c2ch1 = await openThread(ws, { contactId: c2, channelId: ch1 });
      return { ws, c1, c2, ch1, ch2, agentId, c1ch1, c1ch2, c2ch1 };
    }

    it('when filtered by contactId, then only that contact’s threads are listed, newest first', async () => {
      const { ws, c1, c1ch1, c1ch2 } = await arrange();

      const { data } = await ws.api.GET('/threads', { params: { query: { contactId: c1 } } });

      expect(data).toEqual({ data: [c1ch2, c1ch1], pagination: { total: 2, page: 1, limit: 20 } });
    });

    it('when filtered by channelId, then only that channel’s threads are listed', async () => {
      const { ws, ch1, c1ch1, c2ch1 } = await arrange();

      const { data } = await ws.api.GET('/threads', { params: { query: { channelId: ch1 } } });

      expect(data).toEqual({ data: [c2ch1, c1ch1], pagination: { total: 2, page: 1, limit: 20 } });
    });

    it('when filtered by agentId, then only the threads assigned to that agent are listed', async () => {
      const { ws, agentId, c1ch1 } = await arrange();

      const { data } = await ws.api.GET('/threads', { params: { query: { agentId } } });

      expect(data).toEqual({ data: [c1ch1], pagination: { total: 1, page: 1, limit: 20 } });
    });

    it('when filters are combined, then a thread must match all of them', async () => {
      const { ws, c1, ch2, c1ch2 } = await arrange();

      const { data: both } = await ws.api.GET('/threads', { params: { query: { contactId: c1, channelId: ch2, status: 'open' } } });
      const { data: none } = await ws.api.GET('/threads', { params: { query: { contactId: c1, channelId: ch2, status: 'closed' } } });

      expect(both).toEqual({ data: [c1ch2], pagination: { total: 1, page: 1, limit: 20 } });
      expect(none).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
    });

    it('when a filtered list is paged past its end, then the page is empty and the total counts only the matching threads', async () => {
      const { ws, c1 } = await arrange();

      const { data } = await ws.api.GET('/threads', { params: { query: { contactId: c1, page: 2, limit: 2 } } });

      expect(data).toEqual({ data: [], pagination: { total: 2, page: 2, limit: 2 } });
    });

    it('when filtered by ids no thread has, then the page is empty with total 0', async () => {
      const { ws } = await arrange();

      const { data } = await ws.api.GET('/threads', { params: { query: { contactId: randomUUID(), page: 2 } } });

      expect(data).toEqual({ data: [], pagination: { total: 0, page: 2, limit: 20 } });
    });
  });

  it('when paging with limit 2, then the pages split the list in order and a page past the end is empty with the exact total', async () => {
    const ws = await createWorkspace(server);
    const threads = (await openThreads(ws, 3)).sort(newestFirst);

    const pages = [];
    for (const page of [1, 2, 3]) pages.push((await ws.api.GET('/threads', { params: { query: { page, limit: 2 } } })).data);

    expect(pages).toEqual([
      { data: [threads[0], threads[1]], pagination: { total: 3, page: 1, limit: 2 } },
      { data: [threads[2]], pagination: { total: 3, page: 2, limit: 2 } },
      { data: [], pagination: { total: 3, page: 3, limit: 2 } },
    ]);
  });

  it('when the limit is 1 or 100, then the page holds one thread or all of them', async () => {
    const ws = await createWorkspace(server);
    const threads = (await openThreads(ws, 3)).sort(newestFirst);

    const { data: last } = await ws.api.GET('/threads', { params: { query: { page: 3, limit: 1 } } });
    const { data: all } = await ws.api.GET('/threads', { params: { query: { limit: 100 } } });

    expect(last).toEqual({ data: [threads[2]], pagination: { total: 3, page: 3, limit: 1 } });
    expect(all).toEqual({ data: threads, pagination: { total: 3, page: 1, limit: 100 } });
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['page=0', 'page'],
    ['page=abc', 'page'],
    ['status=pending', 'status'],
    ['contactId=not-a-uuid', 'contactId'],
    ['agentId=123', 'agentId'],
  ])('when the query has %s, then it answers 400 validation_error on that parameter', async (query, field) => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', `/v1/threads?${query}`, { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: { code: 'validation_error', message: 'The request does not match the contract.', details: expect.any(Array), requestId: expect.any(String) },
    });
    expect(res.body.error.details).not.toHaveLength(0);
    expect(res.body.error.details).toEqual(res.body.error.details.map(() => ({ path: `/query/${field}`, message: expect.any(String) })));
  });
});

describe('GET /threads/{id}', () => {
  it('when the thread exists, then it answers 200 with the whole thread', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const { data: message } = await ws.api.POST('/messages', { body: { contactId, channelId: ws.channels[1]!.id, content: 'Olá' } });
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: message!.threadId } }, body: { score: 9, answeredAt: '2026-03-01T10:00:00.000Z' } });
    const row = (await storedThreads(ws.workspaceId))[0]!;

    const { data, response } = await ws.api.GET('/threads/{id}', { params: { path: { id: message!.threadId } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({
      id: message!.threadId,
      contactId,
      channelId: ws.channels[1]!.id,
      agentId: null,
      stageId: await firstStageId(ws),
      status: 'open',
      closedAt: null,
      npsScore: 9,
      npsCreatedAt: '2026-03-01T10:00:00.000Z',
      npsRequestedAt: null,
      lastMessageAt: message!.createdAt,
      lastInboundAt: null,
      labels: [],
      sla: null,
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    });
  });

  it('when the thread was opened with an agent, then it answers the thread as it was created', async () => {
    const ws = await createWorkspace(server);
    const created = await openThread(ws, { contactId: await createContact(ws), channelId: ws.channels[0]!.id, agentId: await createAgent(ws) });

    const { data, response } = await ws.api.GET('/threads/{id}', { params: { path: { id: created.id } } });

    expect(response.status).toBe(200);
    expect(data).toEqual(created);
  });

  it('when the thread is unknown, then it answers 404 not_found', async () => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.GET('/threads/{id}', { params: { path: { id: randomUUID() } } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { code: 'not_found', message: 'Thread not found.', requestId: expect.any(String) } });
  });

  it('when the id is not a UUID, then it answers 400 validation_error on the path', async () => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', '/v1/threads/not-a-uuid', { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/params/id', message: 'must match format "uuid"' }],
        requestId: expect.any(String),
      },
    });
  });
});

describe('POST /threads', () => {
  it('when the body names a contact, a channel and an agent, then it answers 201 with an open thread and stores it', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const agentId = await createAgent(ws);
    const channelId = ws.channels[0]!.id;

    const { data, response } = await ws.api.POST('/threads', { body: { contactId, channelId, agentId } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      contactId,
      channelId,
      agentId,
      stageId: await firstStageId(ws),
      status: 'open',
      closedAt: null,
      npsScore: null,
      npsCreatedAt: null,
      npsRequestedAt: null,
      lastMessageAt: null,
      lastInboundAt: null,
      labels: [],
      sla: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([
      {
        workspace_id: ws.workspaceId,
        id: data!.id,
        contact_id: contactId,
        channel_id: channelId,
        agent_id: agentId,
        stage_id: data!.stageId,
        stage_entered_at: new Date(data!.createdAt),
        status: 'open',
        closed_at: null,
        nps_score: null,
        nps_created_at: null,
        nps_agent_id: null,
        nps_stage_id: null,
        last_message_at: null,
        last_inbound_at: null,
        nps_requested_at: null,
        labels: [],
        label_keys: [],
        sla: null,
        created_at: new Date(data!.createdAt),
        updated_at: new Date(data!.createdAt),
      },
    ]);
  });

  it('when agentId is left out, then the thread is opened with agentId null', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[1]!.id;

    const { data, response } = await ws.api.POST('/threads', { body: { contactId, channelId } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      contactId,
      channelId,
      agentId: null,
      stageId: await firstStageId(ws),
      status: 'open',
      closedAt: null,
      npsScore: null,
      npsCreatedAt: null,
      npsRequestedAt: null,
      lastMessageAt: null,
      lastInboundAt: null,
      labels: [],
      sla: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const rows = await storedThreads(ws.workspaceId);
    expect(rows.map((r) => [r.id, r.agent_id, r.status])).toEqual([[data!.id, null, 'open']]);
  });

  it('when the pair already has an open thread, then it answers 409 conflict naming it and stores nothing', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const existing = await openThread(ws, { contactId, channelId });

    const { error, response } = await ws.api.POST('/threads', { body: { contactId, channelId, agentId: await createAgent(ws) } });

    expect(response.status).toBe(409);
    expect(error).toEqual({
      error: {
        code: 'conflict',
        message: 'This contact already has an open thread on this channel.',
        details: [{ path: '/body/channelId', message: `open thread ${existing.id}`, existingId: existing.id }],
        requestId: expect.any(String),
      },
    });
    const rows = await storedThreads(ws.workspaceId);
    expect(rows.map((r) => [r.id, r.agent_id])).toEqual([[existing.id, null]]);
  });

  it('when the pair’s only thread is closed, then a new open thread is opened', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const old = await openThread(ws, { contactId, channelId });
    await closeThread(ws, old.id);

    const { data, response } = await ws.api.POST('/threads', { body: { contactId, channelId } });

    expect(response.status).toBe(201);
    expect(data).toEqual({ ...old, id: expect.stringMatching(UUID), createdAt: expect.stringMatching(ISO_MS), updatedAt: data!.createdAt });
    expect((await storedThreads(ws.workspaceId)).map((r) => [r.id, r.status])).toEqual([
      [old.id, 'closed'],
      [data!.id, 'open'],
    ]);
  });

  it('when the contact has an open thread on the other channel, then a thread on this channel is opened', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const other = await openThread(ws, { contactId, channelId: ws.channels[0]!.id });

    const { data, response } = await ws.api.POST('/threads', { body: { contactId, channelId: ws.channels[1]!.id } });

    expect(response.status).toBe(201);
    expect(data!.id).not.toBe(other.id);
    expect((await storedThreads(ws.workspaceId)).map((r) => [r.channel_id, r.status])).toEqual([
      [ws.channels[0]!.id, 'open'],
      [ws.channels[1]!.id, 'open'],
    ]);
  });

  it.each([
    ['contactId', 'contact'],
    ['channelId', 'channel'],
    ['agentId', 'agent'],
  ] as const)('when %s names no record of the workspace, then it answers 422 invalid_reference and stores nothing', async (field, what) => {
    const ws = await createWorkspace(server);
    const body = { contactId: await createContact(ws), channelId: ws.channels[0]!.id, agentId: await createAgent(ws), [field]: randomUUID() };

    const { error, response } = await ws.api.POST('/threads', { body });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'invalid_reference',
        message: `The ${what} does not exist.`,
        details: [{ path: `/body/${field}`, message: `no ${what} with this id` }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([]);
  });

  it.each([
    ['channelId is missing', (contactId: string) => ({ contactId }), '/body/channelId'],
    ['agentId is null', (contactId: string, channelId: string) => ({ contactId, channelId, agentId: null }), '/body/agentId'],
    ['there is an unknown field', (contactId: string, channelId: string) => ({ contactId, channelId, status: 'closed' }), '/body/status'],
  ])('when %s, then it answers 400 validation_error and stores nothing', async (_, build, path) => {
    const ws = await createWorkspace(server);
    const body = build(await createContact(ws), ws.channels[0]!.id);

    const res = await request(server, 'POST', '/v1/threads', { apiKey: ws.apiKey, body });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path, message: expect.any(String) }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([]);
  });
});

describe('POST /threads/{id}/nps', () => {
  async function arrange(): Promise<{ ws: TestWorkspace; thread: Thread }> {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws, { contactId: await createContact(ws), channelId: ws.channels[0]!.id });
    return { ws, thread };
  }

  const storedThread = async (ws: TestWorkspace, id: string) =>
    server.db.selectFrom('threads').selectAll().where('workspace_id', '=', ws.workspaceId).where('id', '=', id).executeTakeFirstOrThrow();

  it('when the thread has no answer, then it answers 201 with the thread carrying the score and stores it', async () => {
    const { ws, thread } = await arrange();

    const { data, response } = await ws.api.POST('/threads/{id}/nps', {
      params: { path: { id: thread.id } },
      body: { score: 9, answeredAt: '2026-03-10T12:15:30.250Z' },
    });

    expect(response.status).toBe(201);
    expect(data).toEqual({ ...thread, npsScore: 9, npsCreatedAt: '2026-03-10T12:15:30.250Z', updatedAt: expect.stringMatching(ISO_MS) });
    expect(data!.updatedAt >= thread.updatedAt).toBe(true);
    const row = await storedThread(ws, thread.id);
    expect(row).toMatchObject({ nps_score: 9, nps_created_at: new Date('2026-03-10T12:15:30.250Z'), updated_at: new Date(data!.updatedAt) });
  });

  it('when answeredAt is left out, then the answer is registered now', async () => {
    const { ws, thread } = await arrange();
    const before = new Date().toISOString();

    const { data, response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread.id } }, body: { score: 3 } });

    const after = new Date().toISOString();
    expect(response.status).toBe(201);
    expect(data).toEqual({ ...thread, npsScore: 3, npsCreatedAt: expect.stringMatching(ISO_MS), updatedAt: expect.stringMatching(ISO_MS) });
    expect(data!.npsCreatedAt! >= before && data!.npsCreatedAt! <= after).toBe(true);
    expect((await storedThread(ws, thread.id)).nps_created_at?.toISOString()).toBe(data!.npsCreatedAt);
  });

  it('when answeredAt carries an offset, then the same instant is stored and answered in UTC with milliseconds', async () => {
    const { ws, thread } = await arrange();

    const { data } = await ws.api.POST('/threads/{id}/nps', {
      params: { path: { id: thread.id } },
      body: { score: 7, answeredAt: '2026-03-10T09:15:30-03:00' },
    });

    expect(data!.npsCreatedAt).toBe('2026-03-10T12:15:30.000Z');
    expect((await storedThread(ws, thread.id)).nps_created_at).toEqual(new Date('2026-03-10T12:15:30.000Z'));
  });

  it.each([
    ['an hour-only offset', '2026-03-10T09:15:30-03', '2026-03-10T12:15:30.000Z'],
    ['an offset without a colon', '2026-03-10T17:45:30.5+0530', '2026-03-10T12:15:30.500Z'],
    ['digits past the millisecond', '2026-03-10T12:15:30.123999Z', '2026-03-10T12:15:30.123Z'],
    ['a leap second (read as the next second)', '2016-12-31T23:59:60Z', '2017-01-01T00:00:00.000Z'],
    ['a lower-case t and z', '2026-03-10t12:15:30z', '2026-03-10T12:15:30.000Z'],
    ['a space instead of the T', '2026-03-10 12:15:30Z', '2026-03-10T12:15:30.000Z'],
    ['a three-digit year', '0100-01-01T00:00:00Z', '0100-01-01T00:00:00.000Z'],
  ])('when answeredAt is written with %s, then the same instant is stored and answered', async (_, answeredAt, expected) => {
    const { ws, thread } = await arrange();

    const { data, response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread.id } }, body: { score: 5, answeredAt } });

    expect(response.status).toBe(201);
    expect(data).toEqual({ ...thread, npsScore: 5, npsCreatedAt: expected, updatedAt: expect.stringMatching(ISO_MS) });
    expect((await storedThread(ws, thread.id)).nps_created_at).toEqual(new Date(expected));
  });

  it('when answeredAt lies in year 0000, then it answers 400 validation_error and stores nothing', async () => {
    const { ws, thread } = await arrange();

    const { error, response } = await ws.api.POST('/threads/{id}/nps', {
      params: { path: { id: thread.id } },
      body: { score: 5, answeredAt: '0000-06-01T00:00:00Z' },
    });

    expect(response.status).toBe(400);
    expect(error).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/answeredAt', message: 'must not be before year 0001' }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThread(ws, thread.id)).toMatchObject({ nps_score: null, nps_created_at: null });
  });

  it('when answeredAt is in the past but its local clock reads later than UTC now, then it is accepted', async () => {
    const { ws, thread } = await arrange();
    const answeredAt = new Date(Date.now() - 60 * 60_000);
    answeredAt.setUTCMilliseconds(0);

    const { data, response } = await ws.api.POST('/threads/{id}/nps', {
      params: { path: { id: thread.id } },
      body: { score: 10, answeredAt: withOffset(answeredAt, 5 * 60) },
    });

    expect(response.status).toBe(201);
    expect(data!.npsCreatedAt).toBe(answeredAt.toISOString());
  });

  it.each([0, 10])('when the score is %i, then it is accepted', async (score) => {
    const { ws, thread } = await arrange();

    const { data, response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread.id } }, body: { score } });

    expect(response.status).toBe(201);
    expect(data!.npsScore).toBe(score);
    expect((await storedThread(ws, thread.id)).nps_score).toBe(score);
  });

  it.each([
    ['one minute ahead in UTC', () => new Date(Date.now() + 60_000).toISOString()],
    ['one hour ahead written in -03:00, whose local clock reads earlier than UTC now', () => withOffset(new Date(Date.now() + 60 * 60_000), -180)],
  ])('when answeredAt is in the future (%s), then it answers 400 validation_error and stores nothing', async (_, answeredAt) => {
    const { ws, thread } = await arrange();

    const { error, response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread.id } }, body: { score: 8, answeredAt: answeredAt() } });

    expect(response.status).toBe(400);
    expect(error).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/answeredAt', message: 'must not be in the future' }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThread(ws, thread.id)).toMatchObject({ nps_score: null, nps_created_at: null });
  });

  it('when the thread already has an answer, then it answers 409 conflict and keeps the first answer', async () => {
    const { ws, thread } = await arrange();
    const path = { id: thread.id };
    const { data: first } = await ws.api.POST('/threads/{id}/nps', { params: { path }, body: { score: 2, answeredAt: '2026-04-01T08:00:00.000Z' } });

    const { error, response } = await ws.api.POST('/threads/{id}/nps', { params: { path }, body: { score: 10 } });

    expect(response.status).toBe(409);
    expect(error).toEqual({ error: { code: 'conflict', message: 'This thread already has an NPS answer.', requestId: expect.any(String) } });
    const row = await storedThread(ws, thread.id);
    expect(row).toMatchObject({ nps_score: 2, nps_created_at: new Date('2026-04-01T08:00:00.000Z'), updated_at: new Date(first!.updatedAt) });
  });

  it.each([11, -1, 7.5])('when the score is %s, then it answers 400 validation_error and stores nothing', async (score) => {
    const { ws, thread } = await arrange();

    const res = await request(server, 'POST', `/v1/threads/${thread.id}/nps`, { apiKey: ws.apiKey, body: { score } });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/score', message: expect.any(String) }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThread(ws, thread.id)).toMatchObject({ nps_score: null, nps_created_at: null });
  });

  it.each([
    ['score is missing', { answeredAt: '2026-03-10T12:00:00Z' }, '/body/score'],
    ['answeredAt has no offset', { score: 5, answeredAt: '2026-03-10T12:00:00' }, '/body/answeredAt'],
    ['answeredAt is not a date', { score: 5, answeredAt: 'yesterday' }, '/body/answeredAt'],
  ])('when %s, then it answers 400 validation_error and stores nothing', async (_, body, path) => {
    const { ws, thread } = await arrange();

    const res = await request(server, 'POST', `/v1/threads/${thread.id}/nps`, { apiKey: ws.apiKey, body });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path, message: expect.any(String) }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThread(ws, thread.id)).toMatchObject({ nps_score: null, nps_created_at: null });
  });

  it('when the thread is unknown, then it answers 404 not_found', async () => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: randomUUID() } }, body: { score: 9 } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { code: 'not_found', message: 'Thread not found.', requestId: expect.any(String) } });
  });
});
