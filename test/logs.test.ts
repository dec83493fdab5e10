// Logs: JSON lines, the request id on every line a request writes, who made each request (client
// IP, key, workspace) and the error code of a failure, requests whose client left, the throttling
// warnings once per window, and never an API key.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { LEVEL, LogCapture, waitFor } from './helpers/processes.js';
import { emptyDatabase, startServer, type TestServer } from './helpers/server.js';
import { openStream } from './helpers/sse.js';

const FAILED_AUTH_LIMIT = 3;
const BAD_KEY = `sfk_${'Zz9'.repeat(15)}`;

let server: TestServer;
let workspace: TestWorkspace;
const logs = new LogCapture();
beforeAll(async () => {
  // X-Forwarded-For from loopback is trusted, so each test is a client of its own.
  server = await startServer({ logs: logs.destination, config: { failedAuthLimit: FAILED_AUTH_LIMIT, trustProxy: 'loopback' } });
  workspace = await createWorkspace(server);
});
afterAll(async () => {
  await server.close();
});

describe('request logs', () => {
  it('when requests succeed and fail, then each writes one access line with its id, client IP, key, workspace and status, and no key', async () => {
    const wrongKey = BAD_KEY;
    const ok = await request(server, 'GET', '/v1/agents', {
      apiKey: workspace.apiKey,
      headers: { 'x-request-id': 'log-test-ok', 'x-forwarded-for': '203.0.113.7' },
    });
    const denied = await request(server, 'GET', '/v1/agents', {
      apiKey: wrongKey,
      headers: { 'x-request-id': 'log-test-denied', 'x-forwarded-for': '203.0.113.8' },
    });

    const lines = logs.lines.filter((line) => String(line.reqId).startsWith('log-test-'));
    expect(lines).toEqual([
      expect.objectContaining({
        level: LEVEL.info,
        msg: 'request',
        reqId: 'log-test-ok',
        method: 'GET',
        path: '/v1/agents',
        status: ok.status,
        ip: '203.0.113.7',
        keyId: workspace.keyId,
        workspaceId: workspace.workspaceId,
      }),
      expect.objectContaining({
        level: LEVEL.info,
        msg: 'request',
        reqId: 'log-test-denied',
        status: denied.status,
        ip: '203.0.113.8',
        keyId: null,
        workspaceId: null,
      }),
    ]);
    expect(lines[0]).not.toHaveProperty('errorCode');
    expect(lines[0]).not.toHaveProperty('aborted');
    const everything = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(everything).not.toContain(workspace.apiKey);
    expect(everything).not.toContain(wrongKey);
    expect(everything).not.toMatch(/sfk_[0-9A-Za-z]{32,}/);
  });

  // The path and method are matched before the key is read: those failures know no workspace.
  it.each([
    ['an unknown path', 'GET', '/v1/nowhere', undefined, 404, 'not_found', false],
    ['another method', 'PUT', '/v1/agents', undefined, 405, 'method_not_allowed', false],
    ['no key', 'GET', '/v1/agents', undefined, 401, 'unauthorized', false],
    ['a bad body', 'POST', '/v1/agents', { name: '' }, 400, 'validation_error', true],
    ['an unknown id', 'GET', '/v1/agents/01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f', undefined, 404, 'not_found', true],
  ])('when a request fails with %s, then its access line carries the error code', async (label, method, path, body, status, errorCode, authenticated) => {
    const id = `log-test-code-${label.replace(/\W+/g, '-')}`;
    const apiKey = errorCode === 'unauthorized' ? undefined : workspace.apiKey;
    const response = await request(server, method, path, { ...(apiKey && { apiKey }), ...(body && { body }), headers: { 'x-request-id': id } });

    expect(response.status).toBe(status);
    expect(response.body.error.requestId).toBe(id);
    expect(logs.lines.filter((line) => line.reqId === id && line.msg === 'request')).toEqual([
      expect.objectContaining({ status, errorCode, workspaceId: authenticated ? workspace.workspaceId : null }),
    ]);
  });

  it('when a client leaves halfway through its body, then its request still writes one access line, status 499 and aborted', async () => {
    const id = 'log-test-left-mid-body';
    const { hostname, port } = new URL(server.baseUrl);
    const head =
      `POST /v1/contacts HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${workspace.apiKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 1000\r\nX-Request-Id: ${id}\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n{"name":"Ana`;
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), hostname, () => socket.write(head, () => socket.destroy()));
      socket.on('error', () => {});
      socket.once('close', () => resolve());
    });

    await waitFor('the access line of the request whose client left', () => logs.lines.some((line) => line.reqId === id && line.msg === 'request'));
    expect(logs.lines.filter((line) => line.reqId === id && line.msg === 'request')).toEqual([
      expect.objectContaining({
        level: LEVEL.info,
        method: 'POST',
        path: '/v1/contacts',
        status: 499,
        aborted: true,
        // Its address, though the socket is gone; its key only if authentication finished before it left.
        ip: '203.0.113.9',
      }),
    ]);
  });

  it('when a client closes its event stream, then the stream writes one access line, status 200 and aborted', async () => {
    const ws = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey });
    expect(stream.status).toBe(200);

    stream.close();

    const streamLines = () => logs.lines.filter((line) => line.msg === 'request' && line.keyId === ws.keyId && line.path === '/v1/events/stream');
    await waitFor('the access line of the closed stream', () => streamLines().length > 0);
    expect(streamLines()).toEqual([expect.objectContaining({ method: 'GET', status: 200, aborted: true, workspaceId: ws.workspaceId })]);
  });

  it('when a client keeps failing authentication, then its throttling is logged once, with its IP, and its requests with a valid key are not', async () => {
    const ip = '198.51.100.77';
    const bad = { authorization: `Bearer ${BAD_KEY}`, 'x-forwarded-for': ip };
    for (let i = 0; i < FAILED_AUTH_LIMIT + 4; i++) await request(server, 'GET', '/v1/agents', { headers: bad });
    const valid = await request(server, 'GET', '/v1/agents', { apiKey: workspace.apiKey, headers: { 'x-forwarded-for': ip } });

    expect(valid.status).toBe(200);
    const warnings = logs.matching(/^client throttled/, LEVEL.warn).filter((line) => line.ip === ip);
    expect(warnings).toEqual([
      expect.objectContaining({ ip, client: ip, failures: FAILED_AUTH_LIMIT + 1, retryAfterSeconds: expect.any(Number), reqId: expect.any(String) }),
    ]);
    const throttled = logs.lines.filter((line) => line.msg === 'request' && line.ip === ip && line.status === 429);
    expect(throttled).toHaveLength(4);
    expect(throttled.every((line) => line.errorCode === 'rate_limited')).toBe(true);
  });

  it('when a key uses up its plan, then reaching the limit is logged once for the window', async () => {
    const free = await createWorkspace(server, { plan: 'free' });
    for (let i = 0; i < 63; i++) await request(server, 'GET', '/v1/agents', { apiKey: free.apiKey });

    expect(logs.matching(/^API key reached its plan limit/, LEVEL.warn).filter((line) => line.keyId === free.keyId)).toEqual([
      expect.objectContaining({ keyId: free.keyId, workspaceId: free.workspaceId, plan: 'free', limit: 60, retryAfterSeconds: expect.any(Number) }),
    ]);
    expect(logs.lines.filter((line) => line.msg === 'request' && line.keyId === free.keyId && line.status === 429)).toHaveLength(3);
  });

  it('when a request fails unexpectedly, then its error is logged with the request id, and the body tells nothing', async () => {
    const empty = await emptyDatabase();
    const brokenLogs = new LogCapture();
    const broken = await startServer({ db: empty, redisUrl: false, logs: brokenLogs.destination });
    try {
      const response = await request(broken, 'GET', '/v1/agents', { apiKey: workspace.apiKey, headers: { 'x-request-id': 'log-test-500' } });

      expect(response.status).toBe(500);
      expect(JSON.stringify(response.body)).not.toMatch(/relation|select|api_keys|at /i);
      const errors = brokenLogs.lines.filter((line) => line.level === LEVEL.error);
      expect(errors).toEqual([
        expect.objectContaining({
          reqId: 'log-test-500',
          msg: 'request failed',
          status: 500,
          err: expect.objectContaining({ message: expect.stringContaining('api_keys') }),
        }),
      ]);
      expect(brokenLogs.lines.map((line) => JSON.stringify(line)).join('\n')).not.toContain(workspace.apiKey);
    } finally {
      await broken.close();
      await empty.destroy();
    }
  });
});
