// Channels: the read-only list of a workspace's WhatsApp and Instagram channels.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor, createWorkspace, request, UUID } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function storedChannels(workspaceId: string) {
  return server.db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
}

describe('GET /channels', () => {
  it('when the workspace is new, then it lists its whatsapp and instagram channels exactly as provisioned', async () => {
    const { api, workspaceId, channels } = await createWorkspace(server);
    await createWorkspace(server);

    const { data, response } = await api.GET('/channels');

    expect(response.status).toBe(200);
    expect(channels).toEqual([
      { id: expect.stringMatching(UUID), type: 'whatsapp', name: 'WhatsApp' },
      { id: expect.stringMatching(UUID), type: 'instagram', name: 'Instagram' },
    ]);
    expect(data).toEqual({ data: channels, pagination: { total: 2, page: 1, limit: 20 } });
    const rows = await storedChannels(workspaceId);
    expect(rows.map((r) => ({ id: r.id, type: r.type, name: r.name }))).toEqual(channels);
  });

  it('when a second key of the same workspace lists channels, then it sees the same two', async () => {
    const first = await createWorkspace(server);
    const second = await createWorkspace(server, { workspaceId: first.workspaceId, scopes: ['messages:read'] });

    const { data, response } = await second.api.GET('/channels');

    expect(response.status).toBe(200);
    expect(second.channels).toEqual(first.channels);
    expect(data).toEqual({ data: first.channels, pagination: { total: 2, page: 1, limit: 20 } });
  });

  it('when limit is 1, then page 1 is whatsapp, page 2 instagram and page 3 empty with total 2', async () => {
    const { api, channels } = await createWorkspace(server);

    const pages = [];
    for (const page of [1, 2, 3]) pages.push((await api.GET('/channels', { params: { query: { page, limit: 1 } } })).data);

    expect(pages).toEqual([
      { data: [channels[0]], pagination: { total: 2, page: 1, limit: 1 } },
      { data: [channels[1]], pagination: { total: 2, page: 2, limit: 1 } },
      { data: [], pagination: { total: 2, page: 3, limit: 1 } },
    ]);
  });

  it('when limit is 100, then it answers both channels', async () => {
    const { api, channels } = await createWorkspace(server);

    const { data } = await api.GET('/channels', { params: { query: { limit: 100 } } });

    expect(data).toEqual({ data: channels, pagination: { total: 2, page: 1, limit: 100 } });
  });

  it('when the key lacks messages:read, then it answers 403 forbidden naming the scope', async () => {
    const { apiKey } = await createWorkspace(server, { scopes: ['agents:read', 'messages:write'] });

    const { error, response } = await clientFor(server, apiKey).GET('/channels');

    expect(response.status).toBe(403);
    expect(error).toEqual({ error: { code: 'forbidden', message: 'This API key lacks the scope messages:read.' } });
  });

  it('when a channel is POSTed, then it answers 405 method_not_allowed and stores nothing', async () => {
    const { apiKey, workspaceId } = await createWorkspace(server);

    const response = await request(server, 'POST', '/v1/channels', { apiKey, body: { type: 'whatsapp', name: 'Outro' } });

    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET');
    expect(response.body).toEqual({ error: { code: 'method_not_allowed', message: 'POST is not allowed on this path; use GET.' } });
    expect(await storedChannels(workspaceId)).toHaveLength(2);
  });
});
