// Tenant isolation: with workspace B's key, workspace A's records do not exist — not by path id, not
// as body references, not in lists or list filters, not in NPS statistics.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, createWorkspace, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

interface Tenant {
  ws: TestWorkspace;
  agent: Schemas['Agent'];
  contact: Schemas['Contact'];
  thread: Schemas['Thread'];
  message: Schemas['Message'];
}

/** A workspace with one agent, one contact, and one thread holding one message, all through the API. */
async function createTenant(label: string): Promise<Tenant> {
  const ws = await createWorkspace(server);
  const { data: agent } = await ws.api.POST('/agents', { body: buildAgent({ name: `Agente ${label}` }) });
  const { data: contact } = await ws.api.POST('/contacts', {
    body: buildContact({ name: `Cliente ${label}`, email: `cliente.${label.toLowerCase()}@exemplo.com.br` }),
  });
  await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id, agentId: agent!.id } });
  const { data: message } = await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id, content: `Olá ${label}` } });
  const { data: current } = await ws.api.GET('/threads', { params: { query: { contactId: contact!.id } } });
  return { ws, agent: agent!, contact: contact!, thread: current!.data[0]!, message: message! };
}

async function createTenants(): Promise<{ a: Tenant; b: Tenant }> {
  const a = await createTenant(`A${randomUUID().slice(0, 8)}`);
  const b = await createTenant(`B${randomUUID().slice(0, 8)}`);
  return { a, b };
}

/** Everything stored for a workspace, to show a refused request changed nothing. */
async function snapshot(workspaceId: string) {
  const { db } = server;
  return {
    agents: await db.selectFrom('agents').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    contacts: await db.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    threads: await db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    messages: await db.selectFrom('messages').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    stages: await db.selectFrom('stages').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    history: await db.selectFrom('thread_history').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
  };
}

const notFound = (what: string) => ({ error: { code: 'not_found', message: `${what} not found.`, requestId: expect.any(String) } });

describe('path ids of another workspace', () => {
  const operations: Array<[string, string, (b: TestWorkspace, a: Tenant) => Promise<{ error?: unknown; response: Response }>]> = [
    ['getAgent', 'Agent', (b, a) => b.api.GET('/agents/{id}', { params: { path: { id: a.agent.id } } })],
    [
      'updateAgent',
      'Agent',
      (b, a) => b.api.PATCH('/agents/{id}', { params: { path: { id: a.agent.id } }, body: { name: 'Sequestrado', status: 'inactive' } }),
    ],
    ['deleteAgent', 'Agent', (b, a) => b.api.DELETE('/agents/{id}', { params: { path: { id: a.agent.id } } })],
    ['getContact', 'Contact', (b, a) => b.api.GET('/contacts/{id}', { params: { path: { id: a.contact.id } } })],
    ['getThread', 'Thread', (b, a) => b.api.GET('/threads/{id}', { params: { path: { id: a.thread.id } } })],
    ['registerNps', 'Thread', (b, a) => b.api.POST('/threads/{id}/nps', { params: { path: { id: a.thread.id } }, body: { score: 0 } })],
    ['requestNps', 'Thread', (b, a) => b.api.POST('/threads/{id}/nps/request', { params: { path: { id: a.thread.id } } })],
    ['listThreadMessages', 'Thread', (b, a) => b.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: a.thread.id } } })],
    ['updateThread', 'Thread', (b, a) => b.api.PATCH('/threads/{id}', { params: { path: { id: a.thread.id } }, body: { status: 'closed', agentId: null } })],
    ['listThreadHistory', 'Thread', (b, a) => b.api.GET('/threads/{id}/history', { params: { path: { id: a.thread.id } } })],
    ['updateContact', 'Contact', (b, a) => b.api.PATCH('/contacts/{id}', { params: { path: { id: a.contact.id } }, body: { name: 'Sequestrado' } })],
    ['deleteContact', 'Contact', (b, a) => b.api.DELETE('/contacts/{id}', { params: { path: { id: a.contact.id } } })],
  ];

  it.each(operations)('when B calls %s with A’s id, then it answers 404 not_found and A’s records are unchanged', async (_, what, call) => {
    const { a, b } = await createTenants();
    const before = await snapshot(a.ws.workspaceId);

    const { error, response } = await call(b.ws, a);

    expect(response.status).toBe(404);
    expect(error).toEqual(notFound(what));
    expect(await snapshot(a.ws.workspaceId)).toEqual(before);
  });

  it('when B deletes A’s agent, then A still lists it', async () => {
    const { a, b } = await createTenants();

    await b.ws.api.DELETE('/agents/{id}', { params: { path: { id: a.agent.id } } });

    const { data } = await a.ws.api.GET('/agents');
    expect(data).toEqual({ data: [a.agent], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it.each(operations.filter(([operation]) => operation !== 'deleteAgent' && operation !== 'updateAgent'))(
    'when A calls %s with its own id, then it resolves (the ids above are real)',
    async (_, __, call) => {
      const { a } = await createTenants();

      const { response } = await call(a.ws, a);

      expect([200, 201, 204]).toContain(response.status);
    },
  );

  it('when A reads its agent after B tried to change and delete it, then the agent is as A created it', async () => {
    const { a, b } = await createTenants();
    await b.ws.api.PATCH('/agents/{id}', { params: { path: { id: a.agent.id } }, body: { name: 'Sequestrado' } });
    await b.ws.api.DELETE('/agents/{id}', { params: { path: { id: a.agent.id } } });

    const { data, response } = await a.ws.api.GET('/agents/{id}', { params: { path: { id: a.agent.id } } });

    expect(response.status).toBe(200);
    expect(data).toEqual(a.agent);
  });
});

describe('body references to another workspace', () => {
  it.each([
    [
      'POST /messages with A’s contactId',
      'contactId',
      'contact',
      (a: Tenant, b: Tenant) => b.ws.api.POST('/messages', { body: { contactId: a.contact.id, channelId: b.ws.channels[0]!.id, content: 'Oi' } }),
    ],
    [
      'POST /messages with A’s channelId',
      'channelId',
      'channel',
      (a: Tenant, b: Tenant) => b.ws.api.POST('/messages', { body: { contactId: b.contact.id, channelId: a.ws.channels[1]!.id, content: 'Oi' } }),
    ],
    [
      'POST /threads with A’s contactId',
      'contactId',
      'contact',
      (a: Tenant, b: Tenant) => b.ws.api.POST('/threads', { body: { contactId: a.contact.id, channelId: b.ws.channels[1]!.id } }),
    ],
    [
      'POST /threads with A’s channelId',
      'channelId',
      'channel',
      (a: Tenant, b: Tenant) => b.ws.api.POST('/threads', { body: { contactId: b.contact.id, channelId: a.ws.channels[1]!.id } }),
    ],
    [
      'POST /threads with A’s agentId',
      'agentId',
      'agent',
      (a: Tenant, b: Tenant) => b.ws.api.POST('/threads', { body: { contactId: b.contact.id, channelId: b.ws.channels[1]!.id, agentId: a.agent.id } }),
    ],
  ] as const)('when B sends %s, then it answers 422 invalid_reference and nothing is stored in either workspace', async (_, field, what, send) => {
    const { a, b } = await createTenants();
    const [beforeA, beforeB] = [await snapshot(a.ws.workspaceId), await snapshot(b.ws.workspaceId)];

    const { error, response } = await send(a, b);

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'invalid_reference',
        message: `The ${what} does not exist.`,
        details: [{ path: `/body/${field}`, message: `no ${what} with this id` }],
        requestId: expect.any(String),
      },
    });
    expect(await snapshot(a.ws.workspaceId)).toEqual(beforeA);
    expect(await snapshot(b.ws.workspaceId)).toEqual(beforeB);
  });

  it('when B sends a message to A’s pair (A’s contact on A’s channel, which has an open thread in A), then it answers 422 and A’s thread gets nothing', async () => {
    const { a, b } = await createTenants();
    const [beforeA, beforeB] = [await snapshot(a.ws.workspaceId), await snapshot(b.ws.workspaceId)];

    const { error, response } = await b.ws.api.POST('/messages', { body: { contactId: a.contact.id, channelId: a.ws.channels[0]!.id, content: 'Intruso' } });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'invalid_reference',
        message: expect.stringMatching(/^The (contact|channel) does not exist\.$/),
        details: [{ path: expect.stringMatching(/^\/body\/(contactId|channelId)$/), message: expect.stringMatching(/^no (contact|channel) with this id$/) }],
        requestId: expect.any(String),
      },
    });
    expect(await snapshot(a.ws.workspaceId)).toEqual(beforeA);
    expect(await snapshot(b.ws.workspaceId)).toEqual(beforeB);
  });
});

describe('lists', () => {
  it('when B lists agents, contacts, channels and threads, then only B’s rows are there', async () => {
    const { b } = await createTenants();

    const agents = await b.ws.api.GET('/agents');
    const contacts = await b.ws.api.GET('/contacts');
    const channels = await b.ws.api.GET('/channels');
    const threads = await b.ws.api.GET('/threads');

    expect(agents.data).toEqual({ data: [b.agent], pagination: { total: 1, page: 1, limit: 20 } });
    expect(contacts.data).toEqual({ data: [b.contact], pagination: { total: 1, page: 1, limit: 20 } });
    expect(channels.data!.data.map(({ id, type, name }) => ({ id, type, name }))).toEqual(b.ws.channels);
    expect(channels.data!.pagination).toEqual({ total: 2, page: 1, limit: 20 });
    expect(threads.data).toEqual({ data: [b.thread], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when B lists the messages of its own thread, then only B’s message is there', async () => {
    const { b } = await createTenants();

    const { data } = await b.ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: b.thread.id } } });

    expect(data).toEqual({ data: [b.message], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it.each([
    ['threads', 'contactId', (a: Tenant, b: Tenant) => b.ws.api.GET('/threads', { params: { query: { contactId: a.contact.id } } })],
    ['threads', 'channelId', (a: Tenant, b: Tenant) => b.ws.api.GET('/threads', { params: { query: { channelId: a.ws.channels[0]!.id } } })],
    ['threads', 'agentId', (a: Tenant, b: Tenant) => b.ws.api.GET('/threads', { params: { query: { agentId: a.agent.id } } })],
    ['contacts', 'phone', (a: Tenant, b: Tenant) => b.ws.api.GET('/contacts', { params: { query: { phone: a.contact.phone! } } })],
    ['contacts', 'email', (a: Tenant, b: Tenant) => b.ws.api.GET('/contacts', { params: { query: { email: a.contact.email! } } })],
    ['contacts', 'q', (a: Tenant, b: Tenant) => b.ws.api.GET('/contacts', { params: { query: { q: a.contact.name } } })],
  ] as const)('when B filters %s by A’s %s, then the list is empty', async (_, __, list) => {
    const { a, b } = await createTenants();

    const { data, response } = await list(a, b);

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  it('when A filters its threads by its own contact, then they are there (the filter ids above are real)', async () => {
    const { a } = await createTenants();

    const { data } = await a.ws.api.GET('/threads', { params: { query: { contactId: a.contact.id, channelId: a.ws.channels[0]!.id, agentId: a.agent.id } } });

    expect(data).toEqual({ data: [a.thread], pagination: { total: 1, page: 1, limit: 20 } });
  });
});

describe('NPS statistics', () => {
  const window = { dateFrom: '2026-01-01T00:00:00Z', dateTo: '2026-01-31T23:59:59.999Z' };

  it('when B asks for A’s workspaceId, then it answers 403 forbidden', async () => {
    const { a, b } = await createTenants();

    const { error, response } = await b.ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: a.ws.workspaceId, ...window } } });

    expect(response.status).toBe(403);
    expect(error).toEqual({ error: { code: 'forbidden', message: 'This API key cannot read another workspace.', requestId: expect.any(String) } });
  });

  it('when both workspaces have answers in the window, then each counts only its own', async () => {
    const { a, b } = await createTenants();
    await a.ws.api.POST('/threads/{id}/nps', { params: { path: { id: a.thread.id } }, body: { score: 10, answeredAt: '2026-01-10T00:00:00Z' } });
    await b.ws.api.POST('/threads/{id}/nps', { params: { path: { id: b.thread.id } }, body: { score: 0, answeredAt: '2026-01-10T00:00:00Z' } });

    const statsA = await a.ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: a.ws.workspaceId, ...window } } });
    const statsB = await b.ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: b.ws.workspaceId, ...window } } });

    expect(statsA.data).toEqual({ promotores: 1, neutros: 0, detratores: 0, total: 1, npsScore: 100 });
    expect(statsB.data).toEqual({ promotores: 0, neutros: 0, detratores: 1, total: 1, npsScore: -100 });
  });
});
