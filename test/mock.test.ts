// `npm run mock` (Prism) as the front-end teams use it: every operation of the contract, called
// through the typed client, answers its documented success status with a body that matches the
// contract (the client's middleware checks each response), and a request without a key gets 401.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SupportFunnelClient } from '../client/index.js';
import { contractOperations, spec, type OperationId } from '../src/contract.js';
import { checkedClient } from './helpers/api.js';
import { freePort, waitFor } from './helpers/processes.js';

const KEY = `sfk_${'Mock0key1'.repeat(5)}`;
const AGENT_ID = '01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f';
const CONTACT_ID = '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b';
const CHANNEL_ID = '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f';
const THREAD_ID = '01935f5f-2b3c-7d4e-9f5a-6b7c8d9e0f1a';
const WORKSPACE_ID = '01935f4b-1111-7222-8333-944455566677';

type Call = (api: SupportFunnelClient) => Promise<{ response: Response; error?: unknown }>;

/** One well-formed request per operation; a new operation without one here fails the type check. */
const calls: Record<OperationId, Call> = {
  listAgents: (api) => api.GET('/agents', { params: { query: { page: 1, limit: 20, status: 'active' } } }),
  createAgent: (api) => api.POST('/agents', { body: { name: 'Ana Atendimento', instructions: 'Responda com cordialidade.', model: 'gpt-4o-mini' } }),
  getAgent: (api) => api.GET('/agents/{id}', { params: { path: { id: AGENT_ID } } }),
  updateAgent: (api) => api.PATCH('/agents/{id}', { params: { path: { id: AGENT_ID } }, body: { status: 'inactive' } }),
  deleteAgent: (api) => api.DELETE('/agents/{id}', { params: { path: { id: AGENT_ID } } }),
  listContacts: (api) => api.GET('/contacts', { params: { query: { q: 'silva', phone: '+5511987654321', email: 'mariana.silva@exemplo.com.br' } } }),
  createContact: (api) => api.POST('/contacts', { body: { name: 'Mariana Silva', phone: '+5511987654321', email: 'mariana.silva@exemplo.com.br' } }),
  getContact: (api) => api.GET('/contacts/{id}', { params: { path: { id: CONTACT_ID } } }),
  listChannels: (api) => api.GET('/channels'),
  sendMessage: (api) => api.POST('/messages', { body: { contactId: CONTACT_ID, channelId: CHANNEL_ID, content: 'Olá, Mariana!' } }),
  listThreads: (api) => api.GET('/threads', { params: { query: { status: 'open', contactId: CONTACT_ID, channelId: CHANNEL_ID, agentId: AGENT_ID } } }),
  createThread: (api) => api.POST('/threads', { body: { contactId: CONTACT_ID, channelId: CHANNEL_ID, agentId: AGENT_ID } }),
  getNpsStats: (api) =>
    api.GET('/threads/stats/nps', {
      params: { query: { workspaceId: WORKSPACE_ID, dateFrom: '2026-11-01T00:00:00-03:00', dateTo: '2026-11-30T23:59:59.999-03:00' } },
    }),
  getThread: (api) => api.GET('/threads/{id}', { params: { path: { id: THREAD_ID } } }),
  registerNps: (api) => api.POST('/threads/{id}/nps', { params: { path: { id: THREAD_ID } }, body: { score: 9, answeredAt: '2026-11-20T12:10:44.002-03:00' } }),
  listThreadMessages: (api) => api.GET('/threads/{threadId}/messages', { params: { path: { threadId: THREAD_ID }, query: { page: 1, limit: 20 } } }),
};

/** The operation's documented success status (its one 2xx response). */
function successStatus(op: (typeof contractOperations)[number]): number {
  const statuses = Object.keys(spec.paths[op.path][op.method].responses as object).filter((s) => /^2\d\d$/.test(s));
  expect(statuses, `${op.operationId} documents one success status`).toHaveLength(1);
  return Number(statuses[0]);
}

let mock: ChildProcess;
let baseUrl: string;
let output = '';

beforeAll(async () => {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}/v1`;
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
      expect(error).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
    },
  );
});
