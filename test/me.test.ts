// GET /me: the key that makes the request (its workspace, plan, scopes and rate-limit window), for
// any valid key, whatever its scopes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request, UUID } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

describe('GET /me', () => {
  it('when a free key asks, then it answers its key, workspace, plan, scopes and window, as the RateLimit headers tell it', async () => {
    const ws = await createWorkspace(server, { plan: 'free', scopes: ['contacts:read', 'agents:write'] });

    const { data, response } = await ws.api.GET('/me');

    expect(response.status).toBe(200);
    expect(data).toEqual({
      keyId: ws.keyId,
      workspaceId: ws.workspaceId,
      plan: 'free',
      scopes: ['contacts:read', 'agents:write'],
      rateLimit: { limit: 60, remaining: 59, resetSeconds: 60 },
    });
    expect(data!.keyId).toMatch(UUID);
    expect(response.headers.get('ratelimit-limit')).toBe('60');
    expect(response.headers.get('ratelimit-remaining')).toBe('59');
    expect(response.headers.get('ratelimit-reset')).toBe(String(data!.rateLimit!.resetSeconds));
  });

  it('when a pro key has made requests, then its remaining count includes this one', async () => {
    const ws = await createWorkspace(server, { plan: 'pro' });
    for (let i = 0; i < 3; i++) expect((await ws.api.GET('/agents')).response.status).toBe(200);

    const { data } = await ws.api.GET('/me');

    expect(data!.rateLimit).toEqual({ limit: 300, remaining: 296, resetSeconds: expect.any(Number) });
    expect(data!.rateLimit!.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(data!.rateLimit!.resetSeconds).toBeLessThanOrEqual(60);
  });

  it('when an enterprise key asks, then its rate limit is null and no RateLimit header is sent', async () => {
    const ws = await createWorkspace(server, { plan: 'enterprise' });

    const { data, response } = await ws.api.GET('/me');

    expect(data).toEqual({ keyId: ws.keyId, workspaceId: ws.workspaceId, plan: 'enterprise', scopes: ws.scopes, rateLimit: null });
    expect(response.headers.has('ratelimit-limit')).toBe(false);
  });

  it('when the key holds a single scope, then GET /me still answers: it needs none', async () => {
    const ws = await createWorkspace(server, { scopes: ['messages:write'] });

    const { data, response } = await ws.api.GET('/me');

    expect(response.status).toBe(200);
    expect(data!.scopes).toEqual(['messages:write']);
  });

  it('when its workspaceId is used for the NPS statistics, then they answer for that workspace', async () => {
    const ws = await createWorkspace(server, { scopes: ['messages:read'] });
    const { data: me } = await ws.api.GET('/me');

    const { response } = await ws.api.GET('/threads/stats/nps', {
      params: { query: { workspaceId: me!.workspaceId, dateFrom: '2026-11-01T00:00:00Z', dateTo: '2026-11-30T00:00:00Z' } },
    });

    expect(response.status).toBe(200);
  });

  it('when no key is sent, then it answers 401', async () => {
    const response = await request(server, 'GET', '/v1/me');

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: { code: 'unauthorized', message: 'Missing or invalid API key.', requestId: response.headers.get('x-request-id') } });
  });
});
