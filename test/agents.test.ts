// Agents: list (status, type and availability filters, order, pagination), get, create (AI agents
// and people, and the 400s of mixing their fields), patch (what each type may change), delete.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, buildHuman, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { spec } from '../src/contract.js';
import { startServer, type TestServer } from './helpers/server.js';

type Agent = components['schemas']['Agent'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const MISSING_ID = '01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f';
const AGENT_NOT_FOUND = { error: { code: 'not_found', message: 'Agent not found.', requestId: expect.any(String) } };

async function createAgents(ws: TestWorkspace, count: number): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (let i = 1; i <= count; i++) {
    const { data } = await ws.api.POST('/agents', { body: buildAgent({ name: `Agent ${String(i).padStart(3, '0')}` }) });
    agents.push(data!);
  }
  return agents;
}

async function storedAgents(workspaceId: string) {
  return server.db.selectFrom('agents').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute();
}

/** Sets a row's created_at, which the API never changes: how a test arranges equal timestamps. */
async function backdate(id: string, createdAt: Date): Promise<void> {
  await sql`update agents set created_at = ${createdAt} where id = ${id}`.execute(server.db);
}

/** Sets a status in the table: list tests arrange it there, so they do not depend on PATCH. */
async function setStatus(id: string, status: Agent['status']): Promise<void> {
  await server.db.updateTable('agents').set({ status }).where('id', '=', id).execute();
}

/** Resolves once the clock has passed `iso`, so a later write gets a later timestamp. */
async function afterMillisecond(iso: string): Promise<void> {
  while (Date.now() <= Date.parse(iso)) await new Promise((resolve) => setTimeout(resolve, 2));
}

describe('POST /agents', () => {
  it('when the body is valid, then it answers 201 with an active agent and stores it', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const body = buildAgent();

    const { data, response } = await api.POST('/agents', { body });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      type: 'ai',
      ...body,
      status: 'active',
      availability: null,
      capacity: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const row = await server.db.selectFrom('agents').selectAll().where('id', '=', data!.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ workspace_id: workspaceId, name: body.name, status: 'active', model: body.model });
  });

  it('when two agents are created, then each gets its own id and both are stored in the workspace', async () => {
    const { api, workspaceId } = await createWorkspace(server);

    const first = await api.POST('/agents', { body: buildAgent({ name: 'Primeira' }) });
    const second = await api.POST('/agents', { body: buildAgent({ name: 'Segunda' }) });

    expect([first.response.status, second.response.status]).toEqual([201, 201]);
    expect(second.data!.id).not.toBe(first.data!.id);
    const rows = await storedAgents(workspaceId);
    expect(rows.map((r) => [r.id, r.name, r.status])).toEqual([
      [first.data!.id, 'Primeira', 'active'],
      [second.data!.id, 'Segunda', 'active'],
    ]);
  });
});

describe('GET /agents/{id}', () => {
  it('when the agent exists, then it answers 200 with the agent', async () => {
    const { api } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });

    const { data, response } = await api.GET('/agents/{id}', { params: { path: { id: created!.id } } });

    expect(response.status).toBe(200);
    expect(data).toEqual(created);
  });

  it('when no agent has the id, then it answers 404 not_found', async () => {
    const { api } = await createWorkspace(server);

    const { error, response } = await api.GET('/agents/{id}', { params: { path: { id: MISSING_ID } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
  });

  it('when the agent belongs to another workspace, then it answers 404 not_found', async () => {
    const other = await createWorkspace(server);
    const { data: foreign } = await other.api.POST('/agents', { body: buildAgent() });
    const { api } = await createWorkspace(server);

    const { error, response } = await api.GET('/agents/{id}', { params: { path: { id: foreign!.id } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
  });
});

describe('GET /agents', () => {
  it('when the workspace has agents, then it lists them oldest first with the default pagination', async () => {
    const ws = await createWorkspace(server);
    const agents = await createAgents(ws, 3);
    const other = await createWorkspace(server);
    await createAgents(other, 2);

    const { data, response } = await ws.api.GET('/agents');

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: agents, pagination: { total: 3, page: 1, limit: 20 } });
  });

  it('when the workspace has no agents, then it answers an empty page with total 0', async () => {
    const { api } = await createWorkspace(server);

    const { data, response } = await api.GET('/agents');

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  it('when filtered by status, then it lists only the agents in that status, with their own total', async () => {
    const ws = await createWorkspace(server);
    const [first, second, third] = await createAgents(ws, 3);
    await setStatus(second!.id, 'inactive');
    const paused = { ...second, status: 'inactive' };

    const inactive = await ws.api.GET('/agents', { params: { query: { status: 'inactive' } } });
    const active = await ws.api.GET('/agents', { params: { query: { status: 'active' } } });

    expect(inactive.response.status).toBe(200);
    expect(inactive.data).toEqual({ data: [paused], pagination: { total: 1, page: 1, limit: 20 } });
    expect(active.response.status).toBe(200);
    expect(active.data).toEqual({ data: [first, third], pagination: { total: 2, page: 1, limit: 20 } });
  });

  it('when agents share a createdAt, then they are ordered by createdAt and then by id', async () => {
    const ws = await createWorkspace(server);
    const [a, b, c, d] = await createAgents(ws, 4);
    const tied = new Date('2026-01-10T12:00:00.000Z');
    const later = new Date('2026-01-10T12:00:01.000Z');
    // Rewritten in reverse id order, so neither insertion nor physical order matches the expected one.
    for (const agent of [d!, c!, b!]) await backdate(agent.id, tied);
    await backdate(a!.id, later);

    const { data, response } = await ws.api.GET('/agents');

    expect(response.status).toBe(200);
    expect(data).toEqual({
      data: [b, c, d, a].map((agent) => ({ ...agent, createdAt: (agent === a ? later : tied).toISOString() })),
      pagination: { total: 4, page: 1, limit: 20 },
    });
  });

  it('when page 2 of 3 is asked for, then it answers the middle records in stable order', async () => {
    const ws = await createWorkspace(server);
    const agents = await createAgents(ws, 7);

    const { data, response } = await ws.api.GET('/agents', { params: { query: { page: 2, limit: 3 } } });
    const last = await ws.api.GET('/agents', { params: { query: { page: 3, limit: 3 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: agents.slice(3, 6), pagination: { total: 7, page: 2, limit: 3 } });
    expect(last.data).toEqual({ data: agents.slice(6), pagination: { total: 7, page: 3, limit: 3 } });
  });

  it('when the page is past the last one, then data is empty and total is exact', async () => {
    const ws = await createWorkspace(server);
    await createAgents(ws, 3);

    const { data, response } = await ws.api.GET('/agents', { params: { query: { page: 3, limit: 2 } } });
    const far = await ws.api.GET('/agents', { params: { query: { page: 1_000_000, limit: 100 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 3, page: 3, limit: 2 } });
    expect(far.data).toEqual({ data: [], pagination: { total: 3, page: 1_000_000, limit: 100 } });
  });

  it('when the page is past the last one of a status filter, then total counts only that status', async () => {
    const ws = await createWorkspace(server);
    const [first] = await createAgents(ws, 3);
    await setStatus(first!.id, 'inactive');

    const { data, response } = await ws.api.GET('/agents', { params: { query: { status: 'active', page: 2, limit: 5 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 2, page: 2, limit: 5 } });
  });

  it('when limit is 1, then each page holds exactly one agent, in order', async () => {
    const ws = await createWorkspace(server);
    const agents = await createAgents(ws, 3);

    const pages = [];
    for (const page of [1, 2, 3]) pages.push((await ws.api.GET('/agents', { params: { query: { page, limit: 1 } } })).data);

    expect(pages).toEqual(agents.map((agent, i) => ({ data: [agent], pagination: { total: 3, page: i + 1, limit: 1 } })));
  });

  it('when limit is 100 and there are 101 agents, then page 1 holds 100 and page 2 the last one', async () => {
    const ws = await createWorkspace(server);
    const agents = await createAgents(ws, 101);

    const first = await ws.api.GET('/agents', { params: { query: { limit: 100 } } });
    const second = await ws.api.GET('/agents', { params: { query: { page: 2, limit: 100 } } });

    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({ data: agents.slice(0, 100), pagination: { total: 101, page: 1, limit: 100 } });
    expect(second.data).toEqual({ data: agents.slice(100), pagination: { total: 101, page: 2, limit: 100 } });
  });

  // Lists are written as JSON by PostgreSQL, single reads by the service: both must read alike.
  it('when stored timestamps carry microseconds and text needs JSON escapes, then each listed agent equals its GET', async () => {
    const ws = await createWorkspace(server);
    const [agent] = await createAgents(ws, 1);
    const name = 'Zé "Suporte" \\ \t\u2028 😀 <b>';
    await sql`update agents set name = ${name}, created_at = '2026-03-01 12:34:56.789999+00', updated_at = '0099-12-31 23:59:59.0009+00'
               where id = ${agent!.id}`.execute(server.db);

    const listed = await ws.api.GET('/agents');
    const single = await ws.api.GET('/agents/{id}', { params: { path: { id: agent!.id } } });

    expect(single.data).toEqual({ ...agent, name, createdAt: '2026-03-01T12:34:56.789Z', updatedAt: '0099-12-31T23:59:59.000Z' });
    expect(listed.data).toEqual({ data: [single.data], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when responses are not validated (production), then the list goes out as PostgreSQL wrote it, compact like res.json', async () => {
    const production = await startServer({ db: server.db, config: { validateResponses: false } });
    try {
      const ws = await createWorkspace(server);
      const agents = await createAgents(ws, 2);

      const response = await fetch(`${production.baseUrl}/v1/agents`, { headers: { authorization: `Bearer ${ws.apiKey}` } });

      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await response.text()).toBe(JSON.stringify({ data: agents, pagination: { total: 2, page: 1, limit: 20 } }));
    } finally {
      await production.close();
    }
  });
});

describe('PATCH /agents/{id}', () => {
  it('when every field is changed, then it answers 200 with them, updatedAt moves and createdAt does not', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    await afterMillisecond(created!.updatedAt);
    const body = { name: 'Bruno Vendas', instructions: 'Ofereça o catálogo novo.', model: 'gpt-4o', status: 'inactive' as const };

    const { data, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...created, ...body, updatedAt: expect.stringMatching(ISO_MS) });
    expect(Date.parse(data!.updatedAt)).toBeGreaterThan(Date.parse(created!.updatedAt));
    const [row] = await storedAgents(workspaceId);
    expect(row).toEqual({
      workspace_id: workspaceId,
      id: created!.id,
      name: body.name,
      status: 'inactive',
      type: 'ai',
      instructions: body.instructions,
      model: body.model,
      availability: null,
      capacity: null,
      last_assigned_at: null,
      created_at: new Date(created!.createdAt),
      updated_at: new Date(data!.updatedAt),
    });
  });

  it.each([
    ['name', { name: 'Carla Suporte' }],
    ['instructions', { instructions: 'Responda em inglês.' }],
    ['model', { model: 'claude-haiku' }],
    ['status', { status: 'inactive' as const }],
  ])('when only %s is sent, then only it changes and the other fields keep their value', async (_field, body) => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    await afterMillisecond(created!.updatedAt);

    const { data, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...created, ...body, updatedAt: expect.stringMatching(ISO_MS) });
    expect(Date.parse(data!.updatedAt)).toBeGreaterThan(Date.parse(created!.updatedAt));
    const { data: fetched } = await api.GET('/agents/{id}', { params: { path: { id: created!.id } } });
    expect(fetched).toEqual(data);
    expect(await storedAgents(workspaceId)).toHaveLength(1);
  });

  it('when an inactive agent is set active again, then it answers 200 with status active', async () => {
    const { api } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body: { status: 'inactive' } });

    const { data, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body: { status: 'active' } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...created, status: 'active', updatedAt: expect.stringMatching(ISO_MS) });
  });

  it('when the body is empty {}, then it answers 400 validation_error and changes nothing', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    const before = await storedAgents(workspaceId);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body: {} });

    expect(response.status).toBe(400);
    expect(error).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body', message: 'must NOT have fewer than 1 properties' }],
        requestId: expect.any(String),
      },
    });
    expect(await storedAgents(workspaceId)).toEqual(before);
  });

  it('when no agent has the id, then it answers 404 not_found and stores nothing', async () => {
    const { api, workspaceId } = await createWorkspace(server);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: MISSING_ID } }, body: { name: 'Nova' } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
    expect(await storedAgents(workspaceId)).toEqual([]);
  });

  it('when the agent belongs to another workspace, then it answers 404 and the agent is unchanged', async () => {
    const other = await createWorkspace(server);
    const { data: foreign } = await other.api.POST('/agents', { body: buildAgent() });
    const before = await storedAgents(other.workspaceId);
    const { api } = await createWorkspace(server);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: foreign!.id } }, body: { status: 'inactive' } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
    expect(await storedAgents(other.workspaceId)).toEqual(before);
  });
});

describe('DELETE /agents/{id}', () => {
  it('when the agent exists, then it answers 204 without a body and the agent is gone', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: kept } = await api.POST('/agents', { body: buildAgent({ name: 'Fica' }) });
    const { data: created } = await api.POST('/agents', { body: buildAgent({ name: 'Sai' }) });

    const { data, response } = await api.DELETE('/agents/{id}', { params: { path: { id: created!.id } } });

    expect(response.status).toBe(204);
    expect(data).toBeUndefined();
    expect(await response.text()).toBe('');
    const after = await api.GET('/agents/{id}', { params: { path: { id: created!.id } } });
    expect(after.response.status).toBe(404);
    expect(after.error).toEqual(AGENT_NOT_FOUND);
    expect((await storedAgents(workspaceId)).map((r) => r.id)).toEqual([kept!.id]);
  });

  it('when the agent was already deleted, then a second delete answers 404 not_found', async () => {
    const { api } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    await api.DELETE('/agents/{id}', { params: { path: { id: created!.id } } });

    const { error, response } = await api.DELETE('/agents/{id}', { params: { path: { id: created!.id } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
  });

  it('when a thread is assigned to the agent, then the thread keeps existing with agentId null', async () => {
    const { api, workspaceId, channels } = await createWorkspace(server);
    const { data: agent } = await api.POST('/agents', { body: buildAgent() });
    const { data: contact } = await api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await api.POST('/threads', {
      body: { contactId: contact!.id, channelId: channels[0]!.id, agentId: agent!.id },
    });
    expect(thread!.agentId).toBe(agent!.id);

    const { response } = await api.DELETE('/agents/{id}', { params: { path: { id: agent!.id } } });

    expect(response.status).toBe(204);
    const { data: after } = await api.GET('/threads/{id}', { params: { path: { id: thread!.id } } });
    expect(after).toEqual({ ...thread, agentId: null });
    const rows = await server.db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: thread!.id, agent_id: null, contact_id: contact!.id, status: 'open' });
    expect(await storedAgents(workspaceId)).toEqual([]);
  });

  it('when the agent belongs to another workspace, then it answers 404 and the agent stays', async () => {
    const other = await createWorkspace(server);
    const { data: foreign } = await other.api.POST('/agents', { body: buildAgent() });
    const { api } = await createWorkspace(server);

    const { error, response } = await api.DELETE('/agents/{id}', { params: { path: { id: foreign!.id } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
    expect((await storedAgents(other.workspaceId)).map((r) => r.id)).toEqual([foreign!.id]);
  });
});

const VALIDATION = (details: { path: string; message: string }[]) => ({
  error: { code: 'validation_error', message: 'The request does not match the contract.', details, requestId: expect.any(String) },
});

describe('people on the team (type human)', () => {
  it('when a person is created, then it answers 201 with type human, no model or instructions, and stores it', async () => {
    const { api, workspaceId } = await createWorkspace(server);

    const { data, response } = await api.POST('/agents', { body: { type: 'human', name: 'Pedro Souza', availability: 'online', capacity: 5 } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      type: 'human',
      name: 'Pedro Souza',
      status: 'active',
      availability: 'online',
      capacity: 5,
      instructions: null,
      model: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const [row] = await storedAgents(workspaceId);
    expect(row).toMatchObject({ type: 'human', availability: 'online', capacity: 5, instructions: null, model: null, last_assigned_at: null });
  });

  it('when a person is created with only a name, then they start offline with no capacity limit', async () => {
    const { api } = await createWorkspace(server);

    const { data, response } = await api.POST('/agents', { body: { type: 'human', name: 'Júlia' } });

    expect(response.status).toBe(201);
    expect(data).toMatchObject({ type: 'human', availability: 'offline', capacity: null, instructions: null, model: null });
  });

  it('when an AI agent is created with type ai, then it is the same as leaving type out', async () => {
    const { api } = await createWorkspace(server);

    const { data, response } = await api.POST('/agents', { body: { ...buildAgent(), type: 'ai' } });

    expect(response.status).toBe(201);
    expect(data).toMatchObject({ type: 'ai', availability: null, capacity: null, model: 'gpt-4o-mini' });
  });

  const ADDITIONAL = 'must NOT have additional properties';
  it.each([
    ['a person with a model', { type: 'human', name: 'Pedro', model: 'gpt-4o-mini' }, [{ path: '/body/model', message: ADDITIONAL }]],
    ['a person with instructions', { type: 'human', name: 'Pedro', instructions: 'Seja gentil.' }, [{ path: '/body/instructions', message: ADDITIONAL }]],
    ['an AI agent without a model', { name: 'Ana', instructions: 'Seja gentil.' }, [{ path: '/body/model', message: "must have required property 'model'" }]],
    [
      'an AI agent without instructions',
      { type: 'ai', name: 'Ana', model: 'gpt-4o-mini' },
      [{ path: '/body/instructions', message: "must have required property 'instructions'" }],
    ],
    ['an AI agent with an availability', { ...buildAgent(), availability: 'online' }, [{ path: '/body/availability', message: ADDITIONAL }]],
    ['an AI agent with a capacity', { ...buildAgent(), capacity: 3 }, [{ path: '/body/capacity', message: ADDITIONAL }]],
    ['a capacity of 0', { type: 'human', name: 'Pedro', capacity: 0 }, [{ path: '/body/capacity', message: 'must be >= 1' }]],
    ['a capacity over 1000', { type: 'human', name: 'Pedro', capacity: 1001 }, [{ path: '/body/capacity', message: 'must be <= 1000' }]],
    [
      'a fractional capacity',
      { type: 'human', name: 'Pedro', capacity: 2.5 },
      [{ path: '/body/capacity', message: expect.stringMatching(/^must be integer/) }],
    ],
    [
      'an unknown availability',
      { type: 'human', name: 'Pedro', availability: 'busy' },
      [{ path: '/body/availability', message: expect.stringContaining('must be equal to one of the allowed values') }],
    ],
    [
      'an unknown type',
      { type: 'robot', name: 'R2', instructions: 'x', model: 'y' },
      [{ path: '/body/type', message: expect.stringContaining('must be equal to one of the allowed values') }],
    ],
  ])('when the body is %s, then it answers 400 validation_error naming the field and stores nothing', async (_case, body, details) => {
    const { workspaceId, apiKey } = await createWorkspace(server);

    const { status, body: answer } = await request(server, 'POST', '/v1/agents', { apiKey, body });

    expect(status).toBe(400);
    expect(answer).toEqual(VALIDATION(details));
    expect(await storedAgents(workspaceId)).toEqual([]);
  });

  it('when a person changes availability and capacity, then it answers 200 with them; capacity null lifts the limit', async () => {
    const { api } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildHuman({ capacity: 3 }) });
    const id = created!.id;

    const away = await api.PATCH('/agents/{id}', { params: { path: { id } }, body: { availability: 'away', capacity: 10 } });
    const unlimited = await api.PATCH('/agents/{id}', { params: { path: { id } }, body: { capacity: null, name: 'Pedro S.' } });

    expect(away.response.status).toBe(200);
    expect(away.data).toEqual({ ...created, availability: 'away', capacity: 10, updatedAt: expect.stringMatching(ISO_MS) });
    expect(unlimited.response.status).toBe(200);
    expect(unlimited.data).toEqual({ ...created, name: 'Pedro S.', availability: 'away', capacity: null, updatedAt: expect.stringMatching(ISO_MS) });
  });

  it.each([
    ['availability', { availability: 'online' as const }],
    ['capacity', { capacity: 4 }],
  ])('when an AI agent is sent %s, then it answers 400 validation_error and changes nothing', async (field, body) => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildAgent() });
    const before = await storedAgents(workspaceId);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body: { name: 'Outra', ...body } });

    expect(response.status).toBe(400);
    expect(error).toEqual(VALIDATION([{ path: `/body/${field}`, message: 'only a human agent has it; this agent is an AI agent' }]));
    expect(await storedAgents(workspaceId)).toEqual(before);
  });

  it.each([
    ['instructions', { instructions: 'Seja gentil.' }],
    ['model', { model: 'gpt-4o' }],
  ])('when a person is sent %s, then it answers 400 validation_error and changes nothing', async (field, body) => {
    const { api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildHuman() });
    const before = await storedAgents(workspaceId);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: created!.id } }, body });

    expect(response.status).toBe(400);
    expect(error).toEqual(VALIDATION([{ path: `/body/${field}`, message: 'only an AI agent has it; this agent is a human agent' }]));
    expect(await storedAgents(workspaceId)).toEqual(before);
  });

  it('when type is sent in a PATCH, then it answers 400 validation_error and the type stays', async () => {
    const { apiKey, api, workspaceId } = await createWorkspace(server);
    const { data: created } = await api.POST('/agents', { body: buildHuman() });
    const before = await storedAgents(workspaceId);

    const { status, body } = await request(server, 'PATCH', `/v1/agents/${created!.id}`, { apiKey, body: { type: 'ai' } });

    expect(status).toBe(400);
    expect(body).toEqual(VALIDATION([{ path: '/body/type', message: expect.stringContaining('must NOT have additional properties') }]));
    expect(await storedAgents(workspaceId)).toEqual(before);
  });

  it('when a PATCH of a person names a missing id, then it answers 404 before looking at the fields', async () => {
    const { api } = await createWorkspace(server);

    const { error, response } = await api.PATCH('/agents/{id}', { params: { path: { id: MISSING_ID } }, body: { availability: 'online' } });

    expect(response.status).toBe(404);
    expect(error).toEqual(AGENT_NOT_FOUND);
  });
});

describe('the 400 examples of openapi.yaml', () => {
  /** An operation's named 400 example as the server would answer it, its requestId aside. */
  const example400 = (path: string, method: 'post' | 'patch', name: string): unknown => {
    const examples = spec.paths[path][method].responses['400'].content?.['application/json']?.examples;
    return { error: { ...examples?.[name]?.value?.error, requestId: expect.any(String) } };
  };

  it('when the mix-ups the examples show are sent, then the answers are the examples, and nothing is stored', async () => {
    const { apiKey, workspaceId } = await createWorkspace(server);
    const { body: ai } = await request(server, 'POST', '/v1/agents', { apiKey, body: buildAgent() });
    const { body: person } = await request(server, 'POST', '/v1/agents', { apiKey, body: buildHuman() });
    const before = await storedAgents(workspaceId);

    const answers = [
      await request(server, 'POST', '/v1/agents', { apiKey, body: { ...buildHuman(), model: 'gpt-4o-mini' } }),
      await request(server, 'POST', '/v1/agents', { apiKey, body: { name: 'Ana', instructions: 'Seja gentil.' } }),
      await request(server, 'PATCH', `/v1/agents/${ai.id}`, { apiKey, body: { availability: 'online' } }),
      await request(server, 'PATCH', `/v1/agents/${person.id}`, { apiKey, body: { model: 'gpt-4o' } }),
    ];

    expect(answers.map((a) => [a.status, a.body])).toEqual([
      [400, example400('/agents', 'post', 'humanWithModel')],
      [400, example400('/agents', 'post', 'aiWithoutModel')],
      [400, example400('/agents/{id}', 'patch', 'aiAvailability')],
      [400, example400('/agents/{id}', 'patch', 'humanModel')],
    ]);
    expect(await storedAgents(workspaceId)).toEqual(before);
  });
});

describe('GET /agents filtered by type and availability', () => {
  it('when filtered, then each filter lists only its agents, alone and combined with status, with their own total', async () => {
    const ws = await createWorkspace(server);
    const { data: ana } = await ws.api.POST('/agents', { body: buildAgent({ name: 'Ana' }) });
    const { data: pedro } = await ws.api.POST('/agents', { body: buildHuman({ name: 'Pedro', availability: 'online' }) });
    const { data: julia } = await ws.api.POST('/agents', { body: buildHuman({ name: 'Júlia', availability: 'away' }) });
    const { data: caio } = await ws.api.POST('/agents', { body: buildHuman({ name: 'Caio', availability: 'online' }) });
    await setStatus(caio!.id, 'inactive');
    const inactiveCaio = { ...caio, status: 'inactive' };
    const other = await createWorkspace(server);
    await other.api.POST('/agents', { body: buildHuman() });
    const list = (query: { type?: 'ai' | 'human'; availability?: 'online' | 'away' | 'offline'; status?: 'active' | 'inactive' }) =>
      ws.api.GET('/agents', { params: { query } }).then(({ data }) => data);

    expect(await list({ type: 'ai' })).toEqual({ data: [ana], pagination: { total: 1, page: 1, limit: 20 } });
    expect(await list({ type: 'human' })).toEqual({ data: [pedro, julia, inactiveCaio], pagination: { total: 3, page: 1, limit: 20 } });
    expect(await list({ availability: 'online' })).toEqual({ data: [pedro, inactiveCaio], pagination: { total: 2, page: 1, limit: 20 } });
    expect(await list({ availability: 'online', status: 'active' })).toEqual({ data: [pedro], pagination: { total: 1, page: 1, limit: 20 } });
    expect(await list({ type: 'ai', availability: 'offline' })).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  it.each([
    ['type', 'robot'],
    ['availability', 'busy'],
  ])('when %s is not one of its values, then it answers 400 validation_error', async (name, value) => {
    const { apiKey } = await createWorkspace(server);

    const { status, body } = await request(server, 'GET', `/v1/agents?${name}=${value}`, { apiKey });

    expect(status).toBe(400);
    expect(body).toEqual(VALIDATION([{ path: `/query/${name}`, message: expect.stringContaining('must be equal to one of the allowed values') }]));
  });
});
