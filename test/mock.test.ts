// `npm run mock` (Prism behind the mock front) as the front-end teams use it: every operation of the
// contract, called through the typed client, answers its documented success status with a body that
// matches the contract (the client's middleware checks each response, error bodies' requestId
// included); a request without a well-formed key gets 401; a bad request gets the very 400 the
// service gives, naming the wrong fields; created records get fresh ids, echo what was sent and hold
// what the service holds for what was left out; a 404 names the record asked for, as the service's does.
import { createHash } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SupportFunnelClient } from '../client/index.js';
import { contractOperations, spec, type OperationId } from '../src/contract.js';
import { checkedClient, createWorkspace, request, UUID, type RawResponse } from './helpers/api.js';
import { freePort, waitFor } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

const KEY = `sfk_${'Mock0key1'.repeat(5)}`;
const AGENT_ID = '01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f';
const CONTACT_ID = '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b';
const CHANNEL_ID = '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f';
const THREAD_ID = '01935f5f-2b3c-7d4e-9f5a-6b7c8d9e0f1a';
const WORKSPACE_ID = '01935f4b-1111-7222-8333-944455566677';
const STAGE_ID = '01935f4d-0a10-7b11-8c12-0d13e14f1502';
const EVENT_ID = '01936a12-4d5e-7f6a-8b7c-9d0e1f2a3b4c';
const ENDPOINT_ID = '01936a10-2b3c-7d4e-8f5a-6b7c8d9e0f1a';
const DELIVERY_ID = '01936a12-4d5f-7a6b-8c7d-9e0f1a2b3c4d';
const AUTOMATION_ID = '01936b20-1a2b-7c3d-8e4f-5a6b7c8d9e01';
const MEDIA_ID = '01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6b';
const SLA_POLICY_ID = '01936c10-2b3c-7d4e-8f5a-6b7c8d9e0f11';
const MESSAGE_ID = '01935f5f-9a8b-7c6d-8e5f-4a3b2c1d0e9f';
const WINDOW = { dateFrom: '2026-11-01T00:00:00-03:00', dateTo: '2026-11-30T23:59:59.999-03:00' };

type Call = (api: SupportFunnelClient) => Promise<{ response: Response; error?: unknown }>;

/** One well-formed request per operation; a new operation without one here fails the type check. */
const calls: Record<OperationId, Call> = {
  getMe: (api) => api.GET('/me'),
  listAgents: (api) => api.GET('/agents', { params: { query: { page: 1, limit: 20, status: 'active' } } }),
  createAgent: (api) => api.POST('/agents', { body: { name: 'Ana Atendimento', instructions: 'Responda com cordialidade.', model: 'gpt-4o-mini' } }),
  getAgent: (api) => api.GET('/agents/{id}', { params: { path: { id: AGENT_ID } } }),
  updateAgent: (api) => api.PATCH('/agents/{id}', { params: { path: { id: AGENT_ID } }, body: { status: 'inactive' } }),
  deleteAgent: (api) => api.DELETE('/agents/{id}', { params: { path: { id: AGENT_ID } } }),
  listContacts: (api) => api.GET('/contacts', { params: { query: { q: 'silva', phone: '+5511987654321', email: 'mariana.silva@exemplo.com.br' } } }),
  createContact: (api) => api.POST('/contacts', { body: { name: 'Mariana Silva', phone: '+5511987654321', email: 'mariana.silva@exemplo.com.br' } }),
  getContact: (api) => api.GET('/contacts/{id}', { params: { path: { id: CONTACT_ID } } }),
  updateContact: (api) => api.PATCH('/contacts/{id}', { params: { path: { id: CONTACT_ID } }, body: { name: 'Mariana Souza Silva', email: null } }),
  deleteContact: (api) => api.DELETE('/contacts/{id}', { params: { path: { id: CONTACT_ID } } }),
  upsertContact: (api) => api.POST('/contacts/upsert', { body: { externalId: 'crm-000123', name: 'Mariana Silva', phone: '+551187654321' } }),
  mergeContact: (api) =>
    api.POST('/contacts/{id}/merge', { params: { path: { id: CONTACT_ID } }, body: { sourceIds: ['01935f51-3e4f-7a5b-9c6d-7e8f9a0b1c2d'] } }),
  listStages: (api) => api.GET('/stages', { params: { query: { page: 1, limit: 20 } } }),
  createStage: (api) => api.POST('/stages', { body: { name: 'Proposta enviada', position: 3 } }),
  updateStage: (api) => api.PATCH('/stages/{id}', { params: { path: { id: STAGE_ID } }, body: { name: 'Em negociação', position: 2 } }),
  deleteStage: (api) => api.DELETE('/stages/{id}', { params: { path: { id: STAGE_ID } } }),
  listChannels: (api) => api.GET('/channels'),
  createChannel: (api) =>
    api.POST('/channels', {
      body: {
        type: 'whatsapp',
        name: 'WhatsApp Vendas',
        provider: 'meta',
        meta: { externalId: '106540352242922', accessToken: 'EAAJb0ZB', appSecret: '3f1c6b2a', verifyToken: 'vendas-verify' },
      },
    }),
  getChannel: (api) => api.GET('/channels/{id}', { params: { path: { id: CHANNEL_ID } } }),
  updateChannel: (api) => api.PATCH('/channels/{id}', { params: { path: { id: CHANNEL_ID } }, body: { name: 'WhatsApp Vendas' } }),
  simulateSandboxInbound: (api) =>
    api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: CHANNEL_ID } },
      body: { from: '+5511987654321', name: 'Mariana Silva', content: 'Oi!' },
    }),
  sendMessage: (api) => api.POST('/messages', { body: { contactId: CONTACT_ID, channelId: CHANNEL_ID, content: 'Olá, Mariana!' } }),
  reactToMessage: (api) => api.POST('/messages/{id}/reactions', { params: { path: { id: MESSAGE_ID } }, body: { emoji: '👍' } }),
  uploadMedia: (api) =>
    api.POST('/media', {
      params: { query: { filename: 'comprovante.pdf' } },
      body: '%PDF-1.4 mock' as never,
      bodySerializer: (body: unknown) => body as string,
      headers: { 'content-type': 'application/pdf' },
    }),
  getMedia: (api) => api.GET('/media/{id}', { params: { path: { id: MEDIA_ID } }, parseAs: 'blob' }),
  listThreads: (api) =>
    api.GET('/threads', { params: { query: { status: 'open', contactId: CONTACT_ID, channelId: CHANNEL_ID, agentId: AGENT_ID, stageId: STAGE_ID } } }),
  createThread: (api) => api.POST('/threads', { body: { contactId: CONTACT_ID, channelId: CHANNEL_ID, agentId: AGENT_ID } }),
  getNpsStats: (api) =>
    api.GET('/threads/stats/nps', {
      params: { query: { workspaceId: WORKSPACE_ID, ...WINDOW, groupBy: 'day' } },
    }),
  getThread: (api) => api.GET('/threads/{id}', { params: { path: { id: THREAD_ID } } }),
  updateThread: (api) => api.PATCH('/threads/{id}', { params: { path: { id: THREAD_ID } }, body: { status: 'closed', stageId: STAGE_ID, agentId: null } }),
  listThreadHistory: (api) => api.GET('/threads/{id}/history', { params: { path: { id: THREAD_ID }, query: { page: 1, limit: 20 } } }),
  getFunnelStats: (api) => api.GET('/threads/stats/funnel', { params: { query: WINDOW } }),
  registerNps: (api) => api.POST('/threads/{id}/nps', { params: { path: { id: THREAD_ID } }, body: { score: 9, answeredAt: '2026-11-20T12:10:44.002-03:00' } }),
  requestNps: (api) => api.POST('/threads/{id}/nps/request', { params: { path: { id: THREAD_ID } } }),
  markThreadRead: (api) => api.POST('/threads/{id}/read', { params: { path: { id: THREAD_ID } }, body: { typing: true } }),
  listThreadMessages: (api) => api.GET('/threads/{threadId}/messages', { params: { path: { threadId: THREAD_ID }, query: { page: 1, limit: 20 } } }),
  listEvents: (api) => api.GET('/events', { params: { query: { type: 'message.created', page: 1, limit: 20 } } }),
  getEvent: (api) => api.GET('/events/{id}', { params: { path: { id: EVENT_ID } } }),
  // The stream stays open: its answer is the status and headers, then the client leaves.
  streamEvents: async (api) => {
    const answer = await api.GET('/events/stream', { params: { query: { types: ['message.created', 'thread.updated'] } }, parseAs: 'stream' });
    if (answer.response.ok) await answer.response.body?.cancel();
    return answer;
  },
  createStreamToken: (api) => api.POST('/events/stream-tokens'),
  listWebhookEndpoints: (api) => api.GET('/webhook-endpoints', { params: { query: { page: 1, limit: 20 } } }),
  createWebhookEndpoint: (api) =>
    api.POST('/webhook-endpoints', {
      body: { url: 'https://crm.exemplo.com.br/hooks/support-funnel', events: ['message.created', 'thread.updated'], description: 'CRM sync' },
    }),
  getWebhookEndpoint: (api) => api.GET('/webhook-endpoints/{id}', { params: { path: { id: ENDPOINT_ID } } }),
  updateWebhookEndpoint: (api) => api.PATCH('/webhook-endpoints/{id}', { params: { path: { id: ENDPOINT_ID } }, body: { enabled: true } }),
  deleteWebhookEndpoint: (api) => api.DELETE('/webhook-endpoints/{id}', { params: { path: { id: ENDPOINT_ID } } }),
  listWebhookDeliveries: (api) => api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id: ENDPOINT_ID }, query: { page: 1, limit: 20 } } }),
  retryWebhookDelivery: (api) =>
    api.POST('/webhook-endpoints/{id}/deliveries/{deliveryId}/retry', { params: { path: { id: ENDPOINT_ID, deliveryId: DELIVERY_ID } } }),
  getSettings: (api) => api.GET('/settings'),
  updateSettings: (api) => api.PATCH('/settings', { body: { timezone: 'America/Manaus' } }),
  listAutomations: (api) => api.GET('/automations', { params: { query: { page: 1, limit: 20 } } }),
  createAutomation: (api) =>
    api.POST('/automations', {
      body: {
        name: 'Encerrar após 3 dias sem resposta',
        trigger: { event: 'thread.idle', minutes: 4320, waitingOn: 'customer' },
        actions: [{ type: 'set_status', status: 'closed' }],
      },
    }),
  getAutomation: (api) => api.GET('/automations/{id}', { params: { path: { id: AUTOMATION_ID } } }),
  updateAutomation: (api) => api.PATCH('/automations/{id}', { params: { path: { id: AUTOMATION_ID } }, body: { enabled: false } }),
  deleteAutomation: (api) => api.DELETE('/automations/{id}', { params: { path: { id: AUTOMATION_ID } } }),
  listSlaPolicies: (api) => api.GET('/sla-policies', { params: { query: { page: 1, limit: 20 } } }),
  createSlaPolicy: (api) =>
    api.POST('/sla-policies', { body: { name: 'Primeira resposta em 15 minutos', targets: { firstResponseMinutes: 15 }, businessHoursOnly: true } }),
  getSlaPolicy: (api) => api.GET('/sla-policies/{id}', { params: { path: { id: SLA_POLICY_ID } } }),
  updateSlaPolicy: (api) => api.PATCH('/sla-policies/{id}', { params: { path: { id: SLA_POLICY_ID } }, body: { warnBeforeMinutes: 3 } }),
  deleteSlaPolicy: (api) => api.DELETE('/sla-policies/{id}', { params: { path: { id: SLA_POLICY_ID } } }),
  getResponseTimesReport: (api) => api.GET('/reports/response-times', { params: { query: { ...WINDOW, groupBy: 'agent' } } }),
  testAutomation: (api) => api.POST('/automations/{id}/test', { params: { path: { id: AUTOMATION_ID } }, body: { threadId: THREAD_ID } }),
  listAutomationRuns: (api) => api.GET('/automations/{id}/runs', { params: { path: { id: AUTOMATION_ID }, query: { page: 1, limit: 20 } } }),
  listThreadAutomationRuns: (api) => api.GET('/threads/{id}/automation-runs', { params: { path: { id: THREAD_ID }, query: { page: 1, limit: 20 } } }),
};

/**
 * The status the mock answers an operation with: its one 2xx response (a 206 answers only a Range), or
 * the first of two where the operation has both (an upsert: 200 found, 201 created).
 */
function successStatus(op: (typeof contractOperations)[number]): number {
  const statuses = Object.keys(spec.paths[op.path][op.method].responses as object).filter((s) => /^2\d\d$/.test(s) && s !== '206');
  expect(statuses.length, `${op.operationId} documents a success status`).toBeGreaterThanOrEqual(1);
  return Math.min(...statuses.map(Number));
}

let mock: ChildProcess;
let baseUrl: string;
let mockOrigin: string;
let output = '';

beforeAll(async () => {
  const port = await freePort();
  mockOrigin = `http://127.0.0.1:${port}`;
  baseUrl = `${mockOrigin}/v1`;
  // Its own process group (npm -> tsx -> node -> prism), so afterAll can stop all of it.
  mock = spawn('npm', ['run', '--silent', 'mock'], {
    detached: true,
    env: { ...process.env, MOCK_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  mock.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  mock.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitFor(
    `the mock on port ${port}`,
    async () => {
      if (mock.exitCode !== null || mock.signalCode !== null) throw new Error(`npm run mock exited (${mock.exitCode ?? mock.signalCode}):\n${output}`);
      return fetch(`${baseUrl}/channels`).then(
        () => true,
        () => false,
      );
    },
    90_000,
  );
}, 120_000);

/** True while any process of the group is left. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

afterAll(async () => {
  const pgid = mock?.pid;
  if (!pgid || !groupAlive(pgid)) return;
  // SIGTERM lets scripts/mock.ts remove its temp copy of the contract; SIGKILL whatever is left after that.
  process.kill(-pgid, 'SIGTERM');
  await waitFor('the mock to stop', () => !groupAlive(pgid), 20_000).catch(() => undefined);
  if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
}, 30_000);

describe('npm run mock', () => {
  it('when asked for every operation, then the list of calls covers the contract', () => {
    expect(Object.keys(calls).sort()).toEqual(contractOperations.map((op) => op.operationId).sort());
  });

  it.each(contractOperations.map((op) => [op.operationId, op] as const))(
    'when %s is called well-formed with a key, then it answers its documented 2xx with a contract-valid body',
    async (operationId, op) => {
      const { response } = await calls[operationId](checkedClient(baseUrl, KEY));

      expect(response.status).toBe(successStatus(op));
    },
  );

  it.each(contractOperations.map((op) => [op.operationId] as const))(
    'when %s is called without a key, then it answers 401 unauthorized',
    async (operationId) => {
      const { response, error } = await calls[operationId](checkedClient(baseUrl));

      expect(response.status).toBe(401);
      expect(error).toEqual({ error: { code: 'unauthorized', message: 'Missing or invalid API key.', requestId: response.headers.get('x-request-id') } });
    },
  );

  /** The stream's first `frames` frames (each ending at a blank line), read as they come; the stream is left open. */
  async function streamed(query: string, frames: number, headers: Record<string, string> = {}): Promise<{ response: Response; text: string }> {
    const response = await fetch(`${baseUrl}/events/stream?token=sst_${'T0ken'.repeat(8)}abc${query}`, { headers });
    const reader = response.body!.getReader();
    let text = '';
    while (text.split('\n\n').length <= frames) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
    }
    await reader.cancel();
    return { response, text };
  }

  it('when a browser opens the event stream with a stream token, then the mock answers the example events as text/event-stream, and keeps it open', async () => {
    const { response, text } = await streamed('', 2);

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(text).toMatch(
      /^id: 01936a12-4d5e-7f6a-8b7c-9d0e1f2a3b4c\nevent: message.created\ndata: \{.*\}\n\nid: 01936a12-5a6b-7c8d-9e0f-1a2b3c4d5e6f\nevent: thread.updated\ndata: \{.*\}\n\n$/,
    );
  });

  it('when the mock stream is asked for some types, or to resume after an id, then it sends those, and an unknown id is event: reset', async () => {
    const threads = await streamed('&types=thread.updated,contact.created', 1);
    const resumed = await streamed('', 1, { 'last-event-id': '01936a12-4d5e-7f6a-8b7c-9d0e1f2a3b4c' });
    const unknown = await streamed('&lastEventId=01936a12-0000-7000-8000-000000000000', 1);

    expect(threads.text).toMatch(/^id: 01936a12-5a6b-7c8d-9e0f-1a2b3c4d5e6f\nevent: thread.updated\n/);
    expect(resumed.text).toMatch(/^id: 01936a12-5a6b-7c8d-9e0f-1a2b3c4d5e6f\nevent: thread.updated\n/);
    expect(unknown.text).toBe('event: reset\ndata: {}\n\n');
  });

  it('when a file is uploaded to the mock, then the answer holds its own type, size, digest and cleaned name', async () => {
    const bytes = Buffer.from('%PDF-1.4 nota fiscal');
    const response = await fetch(`${baseUrl}/media?filename=${encodeURIComponent('notas/nota.pdf')}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/pdf' },
      body: bytes,
    });

    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({
      id: expect.stringMatching(UUID),
      type: 'document',
      mimeType: 'application/pdf',
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      filename: 'notas_nota.pdf',
      caption: null,
      status: 'stored',
    });
  });

  it("when Meta's webhook paths are called at the root, outside /v1, then the mock answers them as documented", async () => {
    const root = baseUrl.replace(/\/v1$/, '');
    const verify = await fetch(`${root}/webhooks/meta/${CHANNEL_ID}?hub.mode=subscribe&hub.verify_token=t&hub.challenge=1158201444`);
    const delivery = await fetch(`${root}/webhooks/meta/${CHANNEL_ID}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=00' },
      body: JSON.stringify({ object: 'whatsapp_business_account', entry: [] }),
    });

    expect([verify.status, await verify.text()]).toEqual([200, '1158201444']);
    expect([delivery.status, await delivery.json()]).toEqual([200, { received: true }]);
  });

  it.each([
    ['another scheme', `Basic ${KEY}`],
    ['a key without the sfk_ prefix', `Bearer ${'a'.repeat(40)}`],
    ['a key too short', 'Bearer sfk_abc123'],
  ])('when the key is %s, then it answers 401 unauthorized', async (_label, authorization) => {
    const response = await request({ baseUrl: mockOrigin }, 'GET', '/v1/agents', { headers: { authorization } });

    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe('unauthorized');
  });

  it('when records are created, then each gets an id of its own and echoes what was sent', async () => {
    const api = checkedClient(baseUrl, KEY);
    const first = await api.POST('/agents', { body: { name: 'Bruno Suporte', instructions: 'Atenda trocas.', model: 'gpt-4o' } });
    const second = await api.POST('/agents', { body: { name: 'Carla Vendas', instructions: 'Atenda vendas.', model: 'gpt-4o-mini' } });
    const contact = await api.POST('/contacts', { body: { name: 'Zé Ninguém' } });

    expect(first.response.status).toBe(201);
    expect(first.data).toMatchObject({
      id: expect.stringMatching(UUID),
      name: 'Bruno Suporte',
      instructions: 'Atenda trocas.',
      model: 'gpt-4o',
      status: 'active',
    });
    expect(second.data).toMatchObject({ id: expect.stringMatching(UUID), name: 'Carla Vendas' });
    expect(new Set([first.data!.id, second.data!.id, AGENT_ID]).size).toBe(3);
    expect(Date.now() - Date.parse(first.data!.createdAt)).toBeLessThan(60_000);
    expect(contact.data).toMatchObject({ id: expect.stringMatching(UUID), name: 'Zé Ninguém', phone: null, email: null });
  });

  it('when a record is read or changed by id, then the answer carries that id', async () => {
    const api = checkedClient(baseUrl, KEY);
    const id = '01935f4e-0000-7000-8000-000000000042';

    const read = await api.GET('/agents/{id}', { params: { path: { id } } });
    const changed = await api.PATCH('/agents/{id}', { params: { path: { id } }, body: { status: 'inactive' } });

    expect(read.data!.id).toBe(id);
    expect(changed.data).toMatchObject({ id, status: 'inactive' });
  });

  it('when a browser on another origin asks first (CORS preflight), then the mock allows it', async () => {
    const response = await fetch(`${baseUrl}/agents`, {
      method: 'OPTIONS',
      headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });

    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-headers')).toBe('authorization,content-type');
  });
});

describe('npm run mock and the service, side by side: the same answers', () => {
  let server: TestServer;
  let serverKey: string;
  beforeAll(async () => {
    server = await startServer();
    serverKey = (await createWorkspace(server)).apiKey;
  });
  afterAll(async () => {
    await server?.close();
  });

  /** The same request to the mock and to the service. */
  async function both(
    method: string,
    path: string,
    options: { body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<[RawResponse, RawResponse]> {
    const mock = await request({ baseUrl: mockOrigin }, method, path, { apiKey: KEY, ...options });
    const real = await request(server, method, path, { apiKey: serverKey, ...options });
    return [mock, real];
  }
  const withoutRequestId = (body: { error: Record<string, unknown> }) => ({ ...body, error: { ...body.error, requestId: undefined } });

  it.each([
    ['a contact without its name', 'POST', '/v1/contacts', { body: { phone: '+5511900001111' } }, ['/body/name']],
    ['a contact with a phone missing its +', 'POST', '/v1/contacts', { body: { name: 'Ana', phone: '5511900001111' } }, ['/body/phone']],
    [
      'a contact with two problems and an unknown field',
      'POST',
      '/v1/contacts',
      { body: { phone: 'x', cpf: '1' } },
      ['/body/name', '/body/phone', '/body/cpf'],
    ],
    ['a message with a malformed contactId', 'POST', '/v1/messages', { body: { contactId: '123', channelId: CHANNEL_ID, content: 'Oi' } }, ['/body/contactId']],
    ['an agent id that is not a UUID', 'GET', '/v1/agents/not-a-uuid', {}, ['/params/id']],
    ['a limit over 100', 'GET', '/v1/contacts?limit=101', {}, ['/query/limit']],
    ['an unknown query parameter', 'GET', '/v1/threads?colour=blue', {}, ['/query/colour']],
    [
      'business hours with a time past 24:00',
      'PATCH',
      '/v1/settings',
      { body: { businessHours: { mon: [['09:00', '24:01']], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] } } },
      ['/body/businessHours/mon/0/1'],
    ],
  ])('when the request is %s, then the mock answers the same 400, naming the wrong fields', async (_label, method, path, options, paths) => {
    const [mock, real] = await both(method, path, options);

    expect(mock.status).toBe(400);
    expect(mock.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual([...paths].sort());
    expect(withoutRequestId(mock.body)).toEqual(withoutRequestId(real.body));
  });

  /** A created record without what only the service can know: its id, its timestamps and, for an automation, its place in the list. */
  const withoutRecordFacts = (body: Record<string, unknown>) => {
    const { id: _id, createdAt: _createdAt, updatedAt: _updatedAt, position: _position, ...sent } = body;
    return sent;
  };

  it('when a contact is created with a name and a phone only, then the mock answers as the service does: no e-mail, no labels, no attributes', async () => {
    const [mock, real] = await both('POST', '/v1/contacts', { body: { name: 'Mariana Silva', phone: '+5511987654321' } });

    expect([mock.status, real.status]).toEqual([201, 201]);
    expect(mock.body).toMatchObject({ name: 'Mariana Silva', phone: '+5511987654321', email: null, labels: [], attributes: {} });
    expect(withoutRecordFacts(mock.body)).toEqual(withoutRecordFacts(real.body));
  });

  it('when an automation is created without conditions, then the mock answers as the service does: empty conditions, the actions sent', async () => {
    const body = {
      name: 'Encerrar após 3 dias sem resposta',
      trigger: { event: 'thread.idle', minutes: 4320, waitingOn: 'customer' },
      actions: [{ type: 'set_status', status: 'closed' }],
    };

    const [mock, real] = await both('POST', '/v1/automations', { body });

    expect([mock.status, real.status]).toEqual([201, 201]);
    expect(mock.body).toMatchObject({ ...body, enabled: true, conditions: {} });
    expect(withoutRecordFacts(mock.body)).toEqual(withoutRecordFacts(real.body));
  });

  it('when a person is created without availability, then the mock answers as the service does: offline, no model, no instructions', async () => {
    const [mock, real] = await both('POST', '/v1/agents', { body: { type: 'human', name: 'Ana Souza' } });

    expect([mock.status, real.status]).toEqual([201, 201]);
    expect(withoutRecordFacts(mock.body)).toEqual(withoutRecordFacts(real.body));
  });

  it.each([
    ['a contact', 'GET', '/v1/contacts/01935f50-0000-7000-8000-0000000000aa'],
    ['a contact to change', 'PATCH', '/v1/contacts/01935f50-0000-7000-8000-0000000000aa', { name: 'Ana' }],
    ["a thread's messages", 'GET', '/v1/threads/01935f5f-0000-7000-8000-0000000000aa/messages'],
    ['a stage to delete', 'DELETE', '/v1/stages/01935f4d-0000-7000-8000-0000000000aa'],
    ['a webhook delivery to retry', 'POST', '/v1/webhook-endpoints/01936a10-0000-7000-8000-0000000000aa/deliveries/01936a12-0000-7000-8000-0000000000aa/retry'],
  ])(
    'when %s is asked for with Prefer: code=404, then the mock answers the 404 the service gives for a record it does not have',
    async (_label, method, path, body?) => {
      const [mock, real] = await both(method, path, { headers: { prefer: 'code=404' }, ...(body && { body }) });

      expect([mock.status, real.status]).toEqual([404, 404]);
      expect(withoutRequestId(mock.body)).toEqual(withoutRequestId(real.body));
      expect(mock.body.error.requestId).toBe(mock.headers.get('x-request-id'));
    },
  );

  it.each([
    ['broken JSON', 'POST', '/v1/agents', { rawBody: '{"name":', headers: { 'content-type': 'application/json' } }, 400],
    ['a form body', 'POST', '/v1/agents', { rawBody: 'name=Ana', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415],
    ['an unknown path', 'GET', '/v1/nowhere', {}, 404],
    ['another method', 'PUT', '/v1/agents', {}, 405],
  ])('when the request has %s, then the mock answers as the service does', async (_label, method, path, options, status) => {
    const [mock, real] = await both(method, path, options);

    expect([mock.status, real.status]).toEqual([status, status]);
    expect(withoutRequestId(mock.body)).toEqual(withoutRequestId(real.body));
  });
});
