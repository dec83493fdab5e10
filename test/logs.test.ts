// Logs: JSON lines, the request id on every line a request writes, and never an API key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../src/db/database.js';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { LEVEL, LogCapture } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let workspace: TestWorkspace;
const logs = new LogCapture();
beforeAll(async () => {
  server = await startServer({ logs: logs.destination });
  workspace = await createWorkspace(server);
});
afterAll(async () => {
  await server.close();
});

describe('request logs', () => {
  it('when requests succeed and fail, then each writes one access line with its id, status and key id, and no key', async () => {
    const wrongKey = `sfk_${'Zz9'.repeat(15)}`;
    const ok = await request(server, 'GET', '/v1/agents', { apiKey: workspace.apiKey, headers: { 'x-request-id': 'log-test-ok' } });
    const denied = await request(server, 'GET', '/v1/agents', { apiKey: wrongKey, headers: { 'x-request-id': 'log-test-denied' } });

    const lines = logs.lines.filter((line) => String(line.reqId).startsWith('log-test-'));
    expect(lines).toEqual([
      expect.objectContaining({ level: LEVEL.info, msg: 'request', reqId: 'log-test-ok', method: 'GET', path: '/v1/agents', status: ok.status, keyId: workspace.keyId }),
      expect.objectContaining({ level: LEVEL.info, msg: 'request', reqId: 'log-test-denied', status: denied.status }),
    ]);
    const everything = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(everything).not.toContain(workspace.apiKey);
    expect(everything).not.toContain(wrongKey);
    expect(everything).not.toMatch(/sfk_[0-9A-Za-z]{32,}/);
  });

  it('when a request fails unexpectedly, then its error is logged with the request id, and the body tells nothing', async () => {
    const empty = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
    const brokenLogs = new LogCapture();
    const broken = await startServer({ db: empty, redisUrl: false, logs: brokenLogs.destination });
    try {
      const response = await request(broken, 'GET', '/v1/agents', { apiKey: workspace.apiKey, headers: { 'x-request-id': 'log-test-500' } });

      expect(response.status).toBe(500);
      expect(JSON.stringify(response.body)).not.toMatch(/relation|select|api_keys|at /i);
      const errors = brokenLogs.lines.filter((line) => line.level === LEVEL.error);
      expect(errors).toEqual([expect.objectContaining({ reqId: 'log-test-500', msg: 'request failed', status: 500, err: expect.objectContaining({ message: expect.stringContaining('api_keys') }) })]);
      expect(brokenLogs.lines.map((line) => JSON.stringify(line)).join('\n')).not.toContain(workspace.apiKey);
    } finally {
      await broken.close();
      await empty.destroy();
    }
  });
});
