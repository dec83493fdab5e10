// The bounds of GET /events/stream: at most STREAMS_PER_KEY streams open at once per API key (a
// stream token's counting on its key), one more a 429 too_many_streams; and open streams never take
// the connections MAX_CONNECTIONS gives requests, so other workspaces and /healthz are still served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { checkResponse } from './helpers/contract.js';
import { waitFor } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';
import { openStream, type SseStream } from './helpers/sse.js';

const PER_KEY = 3;
const MAX_CONNECTIONS = 4;

let server: TestServer;
const opened: SseStream[] = [];
beforeAll(async () => {
  server = await startServer({ config: { streamsPerKey: PER_KEY, maxConnections: MAX_CONNECTIONS } });
});
afterAll(async () => {
  for (const stream of opened) stream.close();
  await server.close();
});

const open = async (options: { key?: string; token?: string }): Promise<SseStream> => {
  const stream = await openStream(server.baseUrl, options);
  opened.push(stream);
  return stream;
};

/** PER_KEY streams of the key, each open (200). */
async function fill(ws: TestWorkspace): Promise<SseStream[]> {
  const streams = await Promise.all(Array.from({ length: PER_KEY }, () => open({ key: ws.apiKey })));
  expect(streams.map((s) => s.status)).toEqual(new Array<number>(PER_KEY).fill(200));
  return streams;
}

const expectTooManyStreams = (stream: SseStream): void => {
  expect(stream.status).toBe(429);
  expect(stream.headers['retry-after']).toBe('5');
  const body: unknown = JSON.parse(stream.body);
  checkResponse('GET', `${server.baseUrl}/v1/events/stream`, stream.status, new Headers(stream.headers as Record<string, string>), body);
  expect(body).toEqual({
    error: {
      code: 'too_many_streams',
      message: `This API key already has ${PER_KEY} event streams open on this instance, its most; close one before opening another.`,
      requestId: expect.any(String),
    },
  });
};

describe('GET /events/stream: streams per key', () => {
  it('when a key holds STREAMS_PER_KEY streams, then one more is 429 too_many_streams, by header or by token, and closing one frees its slot', async () => {
    const ws = await createWorkspace(server);
    const streams = await fill(ws);
    const { data: token } = await ws.api.POST('/events/stream-tokens', {});

    const byHeader = await open({ key: ws.apiKey });
    const byToken = await open({ token: token!.token });
    streams[0]!.close();
    // The slot is free once the server has seen the close: a new stream opens then.
    let again: SseStream | undefined;
    await waitFor('a stream opening again after one closed', async () => {
      again = await open({ key: ws.apiKey });
      return again.status === 200;
    });

    expectTooManyStreams(byHeader);
    expectTooManyStreams(byToken);
    expect(again!.status).toBe(200);
    expectTooManyStreams(await open({ key: ws.apiKey }));
  });

  it("when a key holds all its streams, then another workspace's key opens streams, and its requests are served", async () => {
    const full = await createWorkspace(server);
    const other = await createWorkspace(server);
    await fill(full);

    const otherStream = await open({ key: other.apiKey });
    const otherRequest = await request(server, 'GET', '/v1/agents', { apiKey: other.apiKey });

    expect(otherStream.status).toBe(200);
    expect(otherRequest.status).toBe(200);
  });
});

describe('GET /events/stream: streams and the connection budget', () => {
  it('when more streams are open than MAX_CONNECTIONS, then /healthz and every workspace’s requests are still answered', async () => {
    const workspaces = await Promise.all([createWorkspace(server), createWorkspace(server)]);
    for (const ws of workspaces) await fill(ws);

    const health = await request(server, 'GET', '/healthz');
    const answers = await Promise.all(workspaces.map((ws) => request(server, 'GET', '/v1/agents', { apiKey: ws.apiKey })));

    expect(opened.filter((s) => s.status === 200 && !s.isEnded()).length).toBeGreaterThan(MAX_CONNECTIONS);
    expect(health.status).toBe(200);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
  });
});

describe('STREAMS_PER_KEY', () => {
  it('when it is unset, then a key holds 20 streams; when it is not a positive integer, then the service refuses to start', () => {
    expect(loadConfig({}).streamsPerKey).toBe(20);
    expect(loadConfig({ STREAMS_PER_KEY: '5' }).streamsPerKey).toBe(5);
    for (const wrong of ['0', '-1', '2.5', 'many']) expect(() => loadConfig({ STREAMS_PER_KEY: wrong })).toThrow(ConfigError);
  });
});
