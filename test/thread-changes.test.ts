// Changing a thread (PATCH /threads/{id}): closing and reopening (one open thread per pair, also
// under a race), moving between stages, assigning agents, concurrent changes of one thread; its
// history (GET /threads/{id}/history) in order with actors and reasons; the channel's default
// agent; and the pure planning of a change.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { toApiError } from '../src/middleware/error-handler.js';
import { planThreadChange } from '../src/services/threads.js';
import { buildAgent, buildContact, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Thread = components['schemas']['Thread'];
type Entry = components['schemas']['ThreadHistoryEntry'];
type Stage = components['schemas']['Stage'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function stagesOf(ws: TestWorkspace): Promise<Stage[]> {
  return (await ws.api.GET('/stages')).data!.data;
}

async function createContact(ws: TestWorkspace): Promise<string> {
  return (await ws.api.POST('/contacts', { body: buildContact() })).data!.id;
}

async function createAgent(ws: TestWorkspace, name = 'Ana Atendimento'): Promise<string> {
  return (await ws.api.POST('/agents', { body: buildAgent({ name }) })).data!.id;
}

async function openThread(ws: TestWorkspace, body: Partial<components['schemas']['ThreadCreate']> = {}): Promise<Thread> {
  const { data, response } = await ws.api.POST('/threads', { body: { contactId: await createContact(ws), channelId: ws.channels[0]!.id, ...body } });
  expect(response.status).toBe(201);
  return data!;
}

const patch = (ws: TestWorkspace, id: string, body: components['schemas']['ThreadUpdate']) => ws.api.PATCH('/threads/{id}', { params: { path: { id } }, body });

async function historyOf(ws: TestWorkspace, id: string): Promise<Entry[]> {
  const { data, response } = await ws.api.GET('/threads/{id}/history', { params: { path: { id }, query: { limit: 100 } } });
  expect(response.status).toBe(200);
  return data!.data;
}

const byKey = (ws: TestWorkspace) => ({ type: 'api_key' as const, id: ws.keyId });

/** The entries a thread gets when it is opened, by this key, with no agent. */
const opening = (ws: TestWorkspace, thread: Thread) => [
  { id: expect.stringMatching(UUID), field: 'status', from: null, to: 'open', actor: byKey(ws), reason: null, createdAt: thread.createdAt },
  { id: expect.stringMatching(UUID), field: 'stageId', from: null, to: thread.stageId, actor: byKey(ws), reason: null, createdAt: thread.createdAt },
];

describe('PATCH /threads/{id}', () => {
  it('when closed, then closedAt is set, and the history holds the opening and the closing by this key', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);

    const { data, response } = await patch(ws, thread.id, { status: 'closed' });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...thread, status: 'closed', closedAt: expect.stringMatching(ISO_MS), updatedAt: data!.closedAt });
    expect(await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } }).then((r) => r.data)).toEqual(data);
    expect(await historyOf(ws, thread.id)).toEqual([
      ...opening(ws, thread),
      { id: expect.stringMatching(UUID), field: 'status', from: 'open', to: 'closed', actor: byKey(ws), reason: null, createdAt: data!.closedAt },
    ]);
  });

  it('when reopened, then closedAt is cleared and the reopening is recorded', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    await patch(ws, thread.id, { status: 'closed' });

    const { data } = await patch(ws, thread.id, { status: 'open', reason: 'Cliente voltou a escrever.' });

    expect(data).toMatchObject({ status: 'open', closedAt: null });
    expect((await historyOf(ws, thread.id)).at(-1)).toEqual({
      id: expect.stringMatching(UUID),
      field: 'status',
      from: 'closed',
      to: 'open',
      actor: byKey(ws),
      reason: 'Cliente voltou a escrever.',
      createdAt: data!.updatedAt,
    });
  });

  it('when reopened while the pair has another open thread, then 409 naming it, and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const old = await openThread(ws);
    const { data: closed } = await patch(ws, old.id, { status: 'closed' });
    const { data: current } = await ws.api.POST('/threads', { body: { contactId: old.contactId, channelId: old.channelId } });
    const before = await historyOf(ws, old.id);

    const { error, response } = await patch(ws, old.id, { status: 'open', stageId: (await stagesOf(ws))[1]!.id });

    expect(response.status).toBe(409);
    expect(error).toEqual({
      error: {
        requestId: expect.any(String),
        code: 'conflict',
        message: 'This contact already has an open thread on this channel.',
        details: [{ path: '/body/status', message: `open thread ${current!.id}`, existingId: current!.id }],
      },
    });
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: old.id } } })).data).toEqual(closed);
    expect(await historyOf(ws, old.id)).toEqual(before);
  });

  it('when two closed threads of one pair are reopened at once, then exactly one is reopened and the other answers 409', async () => {
    const ws = await createWorkspace(server);
    const first = await openThread(ws);
    await patch(ws, first.id, { status: 'closed' });
    const { data: second } = await ws.api.POST('/threads', { body: { contactId: first.contactId, channelId: first.channelId } });
    await patch(ws, second!.id, { status: 'closed' });

    const results = await Promise.all([first.id, second!.id].map((id) => patch(ws, id, { status: 'open' })));

    expect(results.map((r) => r.response.status).sort()).toEqual([200, 409]);
    const { data: open } = await ws.api.GET('/threads', { params: { query: { contactId: first.contactId, status: 'open' } } });
    expect(open!.pagination.total).toBe(1);
    const winner = results.find((r) => r.response.status === 200)!.data!;
    const loser = results.find((r) => r.response.status === 409)!.error!;
    expect(loser.error.details).toEqual([{ path: '/body/status', message: `open thread ${winner.id}`, existingId: winner.id }]);
  });

  it('when moved to another stage and assigned at once, with a reason, then one entry per field, in order, shares the time and reason', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    const stage = (await stagesOf(ws))[2]!;
    const agentId = await createAgent(ws);

    const { data } = await patch(ws, thread.id, { status: 'closed', stageId: stage.id, agentId, reason: 'Aguardando comprovante.' });

    expect(data).toEqual({ ...thread, status: 'closed', closedAt: data!.updatedAt, stageId: stage.id, agentId, updatedAt: expect.stringMatching(ISO_MS) });
    const entry = (field: string, from: string | null, to: string | null) => ({
      id: expect.stringMatching(UUID),
      field,
      from,
      to,
      actor: byKey(ws),
      reason: 'Aguardando comprovante.',
      createdAt: data!.updatedAt,
    });
    expect(await historyOf(ws, thread.id)).toEqual([
      ...opening(ws, thread),
      entry('status', 'open', 'closed'),
      entry('stageId', thread.stageId, stage.id),
      entry('agentId', null, agentId),
    ]);
  });

  it('when unassigned with agentId null, then agentId is null and the entry goes from the agent to null', async () => {
    const ws = await createWorkspace(server);
    const agentId = await createAgent(ws);
    const thread = await openThread(ws, { agentId });

    const { data } = await patch(ws, thread.id, { agentId: null });

    expect(data!.agentId).toBeNull();
    expect((await historyOf(ws, thread.id)).map((e) => [e.field, e.from, e.to])).toEqual([
      ['status', null, 'open'],
      ['stageId', null, thread.stageId],
      ['agentId', null, agentId],
      ['agentId', agentId, null],
    ]);
  });

  it('when every field is sent with its current value (ids in upper case), then nothing changes and nothing is recorded', async () => {
    const ws = await createWorkspace(server);
    const agentId = await createAgent(ws);
    const thread = await openThread(ws, { agentId });

    const { data, response } = await patch(ws, thread.id, {
      status: 'open',
      stageId: thread.stageId.toUpperCase(),
      agentId: agentId.toUpperCase(),
      reason: 'Nada muda.',
    });

    expect(response.status).toBe(200);
    expect(data).toEqual(thread);
    expect(await historyOf(ws, thread.id)).toHaveLength(3);
  });

  it.each([
    ['stageId', 'stage', async (other: TestWorkspace) => (await stagesOf(other))[1]!.id],
    ['agentId', 'agent', async (other: TestWorkspace) => createAgent(other)],
  ] as const)('when %s names another workspace’s %s, then 422 invalid_reference and nothing changes', async (field, what, foreignId) => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    const foreign = await foreignId(await createWorkspace(server));

    for (const id of [foreign, randomUUID()]) {
      const { error, response } = await patch(ws, thread.id, { [field]: id });

      expect(response.status).toBe(422);
      expect(error).toEqual({
        error: {
          requestId: expect.any(String),
          code: 'invalid_reference',
          message: `The ${what} does not exist.`,
          details: [{ path: `/body/${field}`, message: `no ${what} with this id` }],
        },
      });
    }
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } })).data).toEqual(thread);
    expect(await historyOf(ws, thread.id)).toHaveLength(2);
  });

  it.each([
    ['unknown', async () => randomUUID()],
    ['of another workspace', async () => (await openThread(await createWorkspace(server))).id],
  ])('when the thread is %s, then 404 not_found', async (_, id) => {
    const ws = await createWorkspace(server);

    const { error, response } = await patch(ws, await id(), { status: 'closed' });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'not_found', message: 'Thread not found.' } });
  });

  it.each([
    ['the body is empty', {}],
    ['the status is unknown', { status: 'archived' }],
    ['agentId is not a UUID', { agentId: 'ana' }],
    ['stageId is null', { stageId: null }],
    ['the reason is empty', { status: 'closed', reason: '' }],
    ['there is an unknown field', { npsScore: 9 }],
  ])('when %s, then 400 validation_error', async (_, body) => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);

    const res = await request(server, 'PATCH', `/v1/threads/${thread.id}`, { apiKey: ws.apiKey, body });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
  });

  it('when 30 changes of one thread run at once, then each applies after the other: the history chains and ends where the thread is', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    const stages = await stagesOf(ws);
    const agents = [await createAgent(ws, 'Ana'), await createAgent(ws, 'Bruno')];

    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        patch(ws, thread.id, {
          stageId: stages[(i * 7) % 4]!.id,
          ...(i % 3 === 0 && { agentId: agents[i % 2]! }),
          ...(i % 5 === 0 && { status: i % 10 === 0 ? 'closed' : 'open' }),
        }),
      ),
    );

    expect(results.map((r) => r.response.status)).toEqual(Array(30).fill(200));
    const history = await historyOf(ws, thread.id);
    const { data: final } = await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } });
    for (const field of ['status', 'stageId', 'agentId'] as const) {
      const entries = history.filter((e) => e.field === field);
      for (let i = 1; i < entries.length; i++) {
        expect(entries[i]!.from, `${field} #${i}`).toBe(entries[i - 1]!.to);
        expect(entries[i]!.from).not.toBe(entries[i]!.to);
      }
      const last = entries.at(-1)?.to ?? null;
      expect(last).toBe({ status: final!.status, stageId: final!.stageId, agentId: final!.agentId }[field]);
    }
    expect(history.map((e) => e.createdAt)).toEqual([...history.map((e) => e.createdAt)].sort());
    expect(final!.updatedAt).toBe(history.at(-1)!.createdAt);
  });
});

describe('the stay in a stage', () => {
  it('when a thread moves on, then the stay it ends is kept to the millisecond: from its opening, then from the previous move', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    const stages = await stagesOf(ws);
    // The scenario: stays of measurable length, 25 ms then 15 ms.
    await new Promise((resolve) => setTimeout(resolve, 25));
    const { data: moved } = await patch(ws, thread.id, { stageId: stages[1]!.id });
    await patch(ws, thread.id, { status: 'closed', agentId: await createAgent(ws) });
    await new Promise((resolve) => setTimeout(resolve, 15));
    const { data: again } = await patch(ws, thread.id, { stageId: stages[3]!.id });

    const rows = await server.db
      .selectFrom('thread_history')
      .select(['field', 'stay_ms'])
      .where('workspace_id', '=', ws.workspaceId)
      .where('thread_id', '=', thread.id)
      .where('field', '=', 'stageId')
      .orderBy('created_at')
      .orderBy('id')
      .execute();

    const ms = (iso: string) => Date.parse(iso);
    // bigint: text from pg, a number from PGlite.
    expect(rows.map((r) => (r.stay_ms === null ? null : Number(r.stay_ms)))).toEqual([
      null,
      ms(moved!.updatedAt) - ms(thread.createdAt),
      ms(again!.updatedAt) - ms(moved!.updatedAt),
    ]);
    expect(Number(rows[1]!.stay_ms)).toBeGreaterThanOrEqual(25);
  });
});

describe('GET /threads/{id}/history', () => {
  it('when the history is longer than a page, then pages follow oldest first by createdAt, then id', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws);
    const stages = await stagesOf(ws);
    for (const stage of [...stages.slice(1), stages[0]!]) await patch(ws, thread.id, { stageId: stage.id });
    const all = await historyOf(ws, thread.id);

    const { data: page2 } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: thread.id }, query: { page: 2, limit: 2 } } });

    expect(all).toHaveLength(6);
    expect(page2).toEqual({ data: all.slice(2, 4), pagination: { total: 6, page: 2, limit: 2 } });
    const order = [...all].sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1));
    expect(all).toEqual(order);
    expect(all.filter((e) => e.field === 'stageId').map((e) => e.to)).toEqual([stages[0]!.id, stages[1]!.id, stages[2]!.id, stages[3]!.id, stages[0]!.id]);
  });

  it.each([
    ['unknown', async () => randomUUID()],
    ['of another workspace', async () => (await openThread(await createWorkspace(server))).id],
  ])('when the thread is %s, then 404 not_found', async (_, id) => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: await id() } } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'not_found', message: 'Thread not found.' } });
  });

  it('when an agent is deleted, then each of its threads records the unassignment by the key, reason agent_deleted', async () => {
    const ws = await createWorkspace(server);
    const agentId = await createAgent(ws);
    const threads = [await openThread(ws, { agentId }), await openThread(ws, { agentId })];
    const untouched = await openThread(ws);

    await ws.api.DELETE('/agents/{id}', { params: { path: { id: agentId } } });

    for (const thread of threads) {
      const last = (await historyOf(ws, thread.id)).at(-1)!;
      expect(last).toEqual({
        id: expect.stringMatching(UUID),
        field: 'agentId',
        from: agentId,
        to: null,
        actor: byKey(ws),
        reason: 'agent_deleted',
        createdAt: expect.stringMatching(ISO_MS),
      });
      expect((await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } })).data!.agentId).toBeNull();
    }
    expect(await historyOf(ws, untouched.id)).toHaveLength(2);
  });
});

describe('the channel’s default agent', () => {
  async function withDefaultAgent(ws: TestWorkspace): Promise<string> {
    const agentId = await createAgent(ws, 'Agente do canal');
    await server.db
      .updateTable('channels')
      .set({ default_agent_id: agentId })
      .where('workspace_id', '=', ws.workspaceId)
      .where('id', '=', ws.channels[0]!.id)
      .execute();
    return agentId;
  }

  it('when the channel has a default agent, then GET /channels shows it', async () => {
    const ws = await createWorkspace(server);
    const agentId = await withDefaultAgent(ws);

    const { data } = await ws.api.GET('/channels');

    expect(data!.data.map((c) => c.defaultAgentId)).toEqual([agentId, null]);
  });

  it('when a thread is opened on it without an agent, then it is assigned to that agent by the system', async () => {
    const ws = await createWorkspace(server);
    const agentId = await withDefaultAgent(ws);

    const thread = await openThread(ws);

    expect(thread.agentId).toBe(agentId);
    expect((await historyOf(ws, thread.id)).at(-1)).toEqual({
      id: expect.stringMatching(UUID),
      field: 'agentId',
      from: null,
      to: agentId,
      actor: { type: 'system', id: null },
      reason: 'channel_default_agent',
      createdAt: thread.createdAt,
    });
  });

  it('when a message opens a thread on it, then the thread is assigned to that agent', async () => {
    const ws = await createWorkspace(server);
    const agentId = await withDefaultAgent(ws);
    const contactId = await createContact(ws);

    const { data: message } = await ws.api.POST('/messages', { body: { contactId, channelId: ws.channels[0]!.id, content: 'Olá!' } });

    const { data: thread } = await ws.api.GET('/threads/{id}', { params: { path: { id: message!.threadId } } });
    expect(thread!.agentId).toBe(agentId);
    expect((await historyOf(ws, thread!.id)).map((e) => [e.field, e.to, e.actor.type])).toEqual([
      ['status', 'open', 'api_key'],
      ['stageId', thread!.stageId, 'api_key'],
      ['agentId', agentId, 'system'],
    ]);
  });

  it('when the body names an agent, or the thread is on another channel, then the default does not apply', async () => {
    const ws = await createWorkspace(server);
    await withDefaultAgent(ws);
    const chosen = await createAgent(ws, 'Escolhido');

    const named = await openThread(ws, { agentId: chosen });
    const elsewhere = await openThread(ws, { channelId: ws.channels[1]!.id });

    expect(named.agentId).toBe(chosen);
    expect((await historyOf(ws, named.id)).at(-1)!.actor).toEqual(byKey(ws));
    expect(elsewhere.agentId).toBeNull();
  });

  it('when a write names another workspace’s agent as a channel’s default, then the foreign key answers 422 on defaultAgentId', () => {
    const error = toApiError({ code: '23503', constraint: 'channels_workspace_id_default_agent_id_fkey' });

    expect([error.status, error.toBody('req-1')]).toEqual([
      422,
      {
        error: {
          code: 'invalid_reference',
          message: 'The agent does not exist.',
          details: [{ path: '/body/defaultAgentId', message: 'no agent with this id' }],
          requestId: 'req-1',
        },
      },
    ]);
  });

  it('when the default agent is deleted, then the channel has none and new threads open unassigned', async () => {
    const ws = await createWorkspace(server);
    const agentId = await withDefaultAgent(ws);

    await ws.api.DELETE('/agents/{id}', { params: { path: { id: agentId } } });

    expect((await ws.api.GET('/channels')).data!.data[0]!.defaultAgentId).toBeNull();
    expect((await openThread(ws)).agentId).toBeNull();
  });
});

describe('GET /threads?stageId=', () => {
  it('when filtered by a stage, then only the threads in it are listed; another workspace’s stage lists none', async () => {
    const ws = await createWorkspace(server);
    const stages = await stagesOf(ws);
    const [a, b] = [await openThread(ws), await openThread(ws)];
    const { data: moved } = await patch(ws, b.id, { stageId: stages[1]!.id });

    const first = await ws.api.GET('/threads', { params: { query: { stageId: stages[0]!.id } } });
    const second = await ws.api.GET('/threads', { params: { query: { stageId: stages[1]!.id } } });
    const foreign = await ws.api.GET('/threads', { params: { query: { stageId: (await stagesOf(await createWorkspace(server)))[0]!.id } } });

    expect(first.data).toEqual({ data: [a], pagination: { total: 1, page: 1, limit: 20 } });
    expect(second.data).toEqual({ data: [moved], pagination: { total: 1, page: 1, limit: 20 } });
    expect(foreign.data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });
});

describe('planThreadChange', () => {
  const now = new Date('2026-11-20T15:00:00.000Z');
  const current = { status: 'open' as const, stage_id: 'a', stage_entered_at: new Date('2026-11-20T14:00:00.000Z'), agent_id: null, labels: ['VIP'] };

  it('when the stage changes, then the stay in the stage it leaves is recorded and the new stay starts now', () => {
    expect(planThreadChange(current, { stageId: 'B' }, now)).toEqual({
      set: { stage_id: 'b', stage_entered_at: now },
      changes: [{ field: 'stageId', from: 'a', to: 'b', stayMs: 3_600_000 }],
    });
  });

  it('when closed and unassigned with nothing to unassign, then only the closing counts', () => {
    expect(planThreadChange(current, { status: 'closed', agentId: null }, now)).toEqual({
      set: { status: 'closed', closed_at: now },
      changes: [{ field: 'status', from: 'open', to: 'closed' }],
    });
  });

  it('when reopened, then closed_at is cleared', () => {
    expect(planThreadChange({ ...current, status: 'closed' }, { status: 'open' }, now).set).toEqual({ status: 'open', closed_at: null });
  });

  it('when the clock of another instance is behind the stay’s start, then the stay is 0, never negative', () => {
    expect(planThreadChange(current, { stageId: 'b' }, new Date('2026-11-20T13:59:59.000Z')).changes[0]).toMatchObject({ stayMs: 0 });
  });

  it('when the labels are the same but for spaces and repeats, then nothing changes; otherwise the whole lists are the entry', () => {
    expect(planThreadChange(current, { labels: [' VIP ', 'vip'] }, now)).toEqual({ set: {}, changes: [] });
    expect(planThreadChange(current, { labels: ['vip', 'Boleto'], status: 'closed' }, now)).toEqual({
      set: { status: 'closed', closed_at: now, labels: ['vip', 'Boleto'] },
      changes: [
        { field: 'status', from: 'open', to: 'closed' },
        { field: 'labels', from: ['VIP'], to: ['vip', 'Boleto'] },
      ],
    });
  });
});
