// Slow clients cannot hold the service: sockets that trickle their headers or their body are cut
// at the operator's limits with a 408 in the error shape, a normal client is served meanwhile, and
// past MAX_CONNECTIONS new connections are refused until the slow ones are gone.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { sleep } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;
/** Node checks deadlines every headersTimeout / 10; the rest is this busy machine's scheduling. */
const SLACK_MS = 600;

interface SlowSocket {
  openedAt: number;
  closedAt?: number;
  received: string;
}

/** A socket that sends `head` at once, then one byte of `rest` every 100 ms, until the server closes it. */
function trickle(port: number, head: string, rest: string): SlowSocket {
  const slow: SlowSocket = { openedAt: Date.now(), received: '' };
  const socket = net.connect(port, '127.0.0.1');
  let timer: NodeJS.Timeout | undefined;
  let sent = 0;
  socket.on('connect', () => {
    socket.write(head);
    timer = setInterval(() => {
      if (sent < rest.length && socket.writable) socket.write(rest[sent++]!);
    }, 100);
  });
  socket.on('data', (chunk) => (slow.received += chunk.toString()));
  socket.on('error', () => {});
  socket.on('close', () => {
    clearInterval(timer);
    slow.closedAt = Date.now();
  });
  return slow;
}

const timedOut = (slow: SlowSocket) => {
  const [head, body] = slow.received.split('\r\n\r\n');
  return { status: head?.split(' ')[1], body: body ? JSON.parse(body) : undefined };
};

const REQUEST_TIMEOUT_BODY = {
  error: { code: 'request_timeout', message: 'The request was not received in time; the connection is closed.', requestId: expect.any(String) },
};

describe('slow clients', () => {
  let server: TestServer;
  let ws: TestWorkspace;
  let port: number;
  beforeAll(async () => {
    server = await startServer({ config: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, maxConnections: 200 } });
    port = Number(new URL(server.baseUrl).port);
    ws = await createWorkspace(server);
    // The operation's first request compiles its validators and prepares its statements (~300-400 ms
    // on this machine): a cold start, not what slow clients cost a normal one, so it happens before them.
    expect((await request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey })).status).toBe(200);
  });
  afterAll(async () => {
    await server.close();
  });

  it('when 40 sockets trickle headers and 40 trickle a body, then each is cut at its limit with 408 and a normal client is served meanwhile', async () => {
    const headers = Array.from({ length: 40 }, () => trickle(port, 'GET /v1/agents HTTP/1.1\r\n', 'Host: x\r\nX-Slow: '.padEnd(1_000, 'y')));
    const body = JSON.stringify({ name: 'Ana', instructions: 'Seja breve.', model: 'gpt-4o-mini' });
    const head = `POST /v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ws.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 1_000}\r\n\r\n`;
    const bodies = Array.from({ length: 40 }, () => trickle(port, head, body.padEnd(body.length + 1_000, ' ')));

    const served: number[] = [];
    for (let i = 0; i < 10; i++) {
      const started = Date.now();
      const response = await request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey });
      expect(response.status).toBe(200);
      served.push(Date.now() - started);
      // The scenario: a normal client's requests spread over the slow ones' lifetime, then past their limit.
      await sleep(150);
    }
    await sleep(REQUEST_TIMEOUT_MS + SLACK_MS);

    expect(Math.max(...served)).toBeLessThan(500);
    for (const slow of headers) {
      expect(slow.closedAt).toBeDefined();
      expect(slow.closedAt! - slow.openedAt).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
      expect(slow.closedAt! - slow.openedAt).toBeLessThanOrEqual(HEADERS_TIMEOUT_MS + SLACK_MS);
      expect(timedOut(slow)).toEqual({ status: '408', body: REQUEST_TIMEOUT_BODY });
    }
    for (const slow of bodies) {
      expect(slow.closedAt).toBeDefined();
      expect(slow.closedAt! - slow.openedAt).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(slow.closedAt! - slow.openedAt).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS + SLACK_MS);
      expect(timedOut(slow).status).toBe('408');
      expect(timedOut(slow).body).toEqual(REQUEST_TIMEOUT_BODY);
    }
    const { body: agents } = await request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey });
    expect(agents.pagination.total).toBe(0);
  });
});

describe('MAX_CONNECTIONS', () => {
  let server: TestServer;
  let ws: TestWorkspace;
  let port: number;
  beforeAll(async () => {
    server = await startServer({ config: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, maxConnections: 5 } });
    port = Number(new URL(server.baseUrl).port);
    ws = await createWorkspace(server);
  });
  afterAll(async () => {
    await server.close();
  });

  it('when 5 sockets hold every connection, then a sixth is closed at once, and once they are cut the service answers again', async () => {
    const holders = Array.from({ length: 5 }, () => trickle(port, 'GET /v1/agents HTTP/1.1\r\n', 'Host: x\r\n'.repeat(100)));
    // Time for the 5 holders to be accepted; a slow accept fails this test (the sixth is served), never passes it.
    await sleep(200);

    const refused = await request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey }).then(
      () => 'served',
      (err: Error) => (err.cause as { code?: string } | undefined)?.code ?? err.message,
    );
    // The scenario: past the headers' time limit, the holders are cut.
    await sleep(HEADERS_TIMEOUT_MS + SLACK_MS);
    const after = await request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey });

    expect(refused).not.toBe('served');
    expect(holders.every((slow) => slow.closedAt !== undefined)).toBe(true);
    expect(after.status).toBe(200);
  });
});
