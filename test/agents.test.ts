// Agents: list (status filter), get, create, patch, delete.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAgent, createWorkspace, ISO_MS, UUID } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

describe('POST /agents', () => {
  it('when the body is valid, then it answers 201 with an active agent and stores it', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const body = buildAgent();

    const { data, response } = await api.POST('/agents', { body });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      ...body,
      status: 'active',
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const row = await server.db.selectFrom('agents').selectAll().where('id', '=', data!.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ workspace_id: workspaceId, name: body.name, status: 'active', model: body.model });
  });
});
