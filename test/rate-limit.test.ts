// Rate limits: per key and plan in a fixed window shared through Redis, the in-process fallback,
// failed authentications per client IP, and failing open while Redis is away.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../src/config.js';
import { createWorkspace, request, type RawResponse } from './helpers/api.js';
import { LEVEL, LogCapture, RedisServer, sleep, waitFor } from './helpers/processes.js';
import { redisUrl, startServer, type TestServer } from './helpers/server.js';

const WINDOW_S = 60;
const BAD_KEY = `sfk_${'0'.repeat(40)}`;

let ipSequence = 0;
/** A client address of its own for each test (the servers trust X-Forwarded-For from loopback). */
const newClientIp = (): string => `198.51.${100 + Math.floor(ipSequence / 250)}.${(ipSequence++ % 250) + 1}`;

const hit = (server: TestServer, apiKey: string | undefined, options: { ip?: string; path?: string; authorization?: string } = {}) =>
  request(server, 'GET', options.path ?? '/v1/agents', {
    ...(apiKey && { apiKey }),
    headers: {
      ...(options.ip && { 'x-forwarded-for': options.ip }),
      ...(options.authorization && { authorization: options.authorization }),
    },
  });

/** Sends `count` requests, `concurrency` at a time; the results keep the order of `send`'s index. */
async function sendMany(count: number, send: (i: number) => Promise<RawResponse>, concurrency = 1): Promise<RawResponse[]> {
  const results: RawResponse[] = new Array(count);
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await send(i);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return results;
}

const statuses = (responses: RawResponse[]): number[] => responses.map((r) => r.status);
const repeat = <T>(value: T, n: number): T[] => new Array<T>(n).fill(value);
const countOf = (responses: RawResponse[], status: number): number => responses.filter((r) => r.status === status).length;

function limitHeaders(response: RawResponse) {
  const number = (name: string) => (response.headers.has(name) ? Number(response.headers.get(name)) : undefined);
  return {
    limit: number('ratelimit-limit'),
    remaining: number('ratelimit-remaining'),
    reset: number('ratelimit-reset'),
    retryAfter: number('retry-after'),
  };
}

const RATE_LIMITED = { error: { code: 'rate_limited', message: expect.any(String), requestId: expect.any(String) } };
const UNAUTHORIZED = { error: { code: 'unauthorized', message: expect.any(String), requestId: expect.any(String) } };

interface LoggedServer extends TestServer {
  logs: LogCapture;
}

/** startServer with the app's log lines captured (to count warnings) and, unless told otherwise, the key cache on. */
async function startLoggedServer(options: { redisUrl: string | undefined; config?: Partial<Config>; waitForRedis?: boolean }): Promise<LoggedServer> {
  const logs = new LogCapture();
  const server = await startServer({
    redisUrl: options.redisUrl ?? false,
    ...(options.waitForRedis !== undefined && { waitForRedis: options.waitForRedis }),
    config: { keyCacheTtlMs: 5_000, ...options.config },
    logs: logs.destination,
  });
  return Object.assign(server, { logs });
}

/** A PostgreSQL URL in the service's configuration: what tells the app it may be one of several instances. */
const POSTGRES_CONFIGURED = { databaseUrl: 'postgres://support@db.example:5432/support' };

describe('rate limits with the in-process store (no Redis)', () => {
  let server: LoggedServer;
  beforeAll(async () => {
    server = await startLoggedServer({
      redisUrl: undefined,
      config: { ...POSTGRES_CONFIGURED, failedAuthLimit: 5, trustProxy: 'loopback', keyCacheTtlMs: 0 },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when the service starts on PostgreSQL without Redis, then it warns once that limits are per process', () => {
    const warnings = server.logs.matching(/rate limits are counted per process/, LEVEL.warn);

    expect(warnings).toHaveLength(1);
  });

  it('when the service starts on the embedded database without Redis (npm start), then nothing warns about the in-process count', async () => {
    const embedded = await startLoggedServer({ redisUrl: undefined, config: { databaseUrl: undefined } });
    await embedded.close();

    expect(embedded.logs.matching(/REDIS_URL/, LEVEL.warn)).toEqual([]);
  });

  it('when a free key sends 61 requests in a window, then 60 succeed and the 61st gets 429', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });

    const responses = await sendMany(61, () => hit(server, apiKey));

    expect(statuses(responses)).toEqual([...repeat(200, 60), 429]);
    expect(responses.map((r) => limitHeaders(r).remaining)).toEqual([...Array.from({ length: 60 }, (_, i) => 59 - i), 0]);
    expect(responses[60]!.body).toEqual(RATE_LIMITED);
    expect(limitHeaders(responses[60]!).retryAfter).toBeGreaterThanOrEqual(1);
  });

  it('when an IP fails authentication past the limit, then it gets 429 with Retry-After', async () => {
    const ip = newClientIp();

    const responses = await sendMany(6, () => hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` }));

    expect(statuses(responses)).toEqual([...repeat(401, 5), 429]);
    expect(responses[5]!.body).toEqual(RATE_LIMITED);
    expect(limitHeaders(responses[5]!).retryAfter).toBeGreaterThanOrEqual(1);
  });
});

describe.skipIf(!redisUrl)('rate limits per API key in Redis (needs Redis)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ config: { trustProxy: 'loopback' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when a free key sends 61 requests, then 60 succeed, counting down, and the 61st gets 429', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });

    const responses = await sendMany(61, () => hit(server, apiKey));

    expect(statuses(responses)).toEqual([...repeat(200, 60), 429]);
    expect(responses.map((r) => limitHeaders(r).limit)).toEqual(repeat(60, 61));
    expect(responses.filter((r) => !(limitHeaders(r).reset! >= 1 && limitHeaders(r).reset! <= WINDOW_S))).toEqual([]);
    expect(responses.map((r) => limitHeaders(r).remaining)).toEqual([...Array.from({ length: 60 }, (_, i) => 59 - i), 0]);
    expect(responses[60]!.body).toEqual(RATE_LIMITED);
  });

  it('when a pro key sends 301 requests, then 300 succeed and the 301st gets 429', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'pro' });

    const responses = await sendMany(301, () => hit(server, apiKey));

    expect(statuses(responses)).toEqual([...repeat(200, 300), 429]);
    expect(limitHeaders(responses[0]!)).toMatchObject({ limit: 300, remaining: 299 });
    expect(limitHeaders(responses[299]!)).toMatchObject({ limit: 300, remaining: 0 });
    expect(responses[300]!.body).toEqual(RATE_LIMITED);
  });

  it('when an enterprise key sends 1,000 requests, then none is limited and none carries RateLimit headers', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'enterprise' });

    const responses = await sendMany(1_000, () => hit(server, apiKey), 8);

    expect(countOf(responses, 200)).toBe(1_000);
    const withHeaders = responses.filter((r) => ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after'].some((h) => r.headers.has(h)));
    expect(withHeaders).toHaveLength(0);
  });

  it('when one key of a workspace is used up, then another key of the same workspace still has its own 60', async () => {
    const first = await createWorkspace(server, { plan: 'free' });
    const second = await createWorkspace(server, { plan: 'free', workspaceId: first.workspaceId });
    const firstResponses = await sendMany(61, () => hit(server, first.apiKey));

    const secondResponse = await hit(server, second.apiKey);

    expect(statuses(firstResponses)).toEqual([...repeat(200, 60), 429]);
    expect(secondResponse.status).toBe(200);
    expect(limitHeaders(secondResponse)).toMatchObject({ limit: 60, remaining: 59 });
  });

  it('when a key is limited, then RateLimit-Reset and Retry-After count the seconds to the end of its window', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });
    const sentFirst = Date.now();
    const first = await hit(server, apiKey);
    const gotFirst = Date.now();
    await sendMany(59, () => hit(server, apiKey));

    const sentLimited = Date.now();
    const limited = await hit(server, apiKey);
    const gotLimited = Date.now();

    // The window ends between sentFirst + 60 s and gotFirst + 60 s; the server answered between sentLimited and gotLimited.
    const earliest = Math.ceil((sentFirst + WINDOW_S * 1000 - gotLimited) / 1000);
    const latest = Math.ceil((gotFirst + WINDOW_S * 1000 - sentLimited) / 1000);
    expect(first.status).toBe(200);
    expect(limitHeaders(first)).toEqual({ limit: 60, remaining: 59, reset: WINDOW_S, retryAfter: undefined });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual(RATE_LIMITED);
    const headers = limitHeaders(limited);
    expect(headers).toMatchObject({ limit: 60, remaining: 0 });
    for (const seconds of [headers.reset!, headers.retryAfter!]) {
      expect(seconds).toBeGreaterThanOrEqual(Math.max(1, earliest));
      expect(seconds).toBeLessThanOrEqual(latest);
    }
  });

  it('when a key lacks the scope, then each request still spends its budget and, once over, it gets 429, not 403', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free', scopes: ['contacts:read'] });

    const responses = await sendMany(61, () => hit(server, apiKey, { path: '/v1/agents' }));
    const permitted = await hit(server, apiKey, { path: '/v1/contacts' });

    expect(statuses(responses)).toEqual([...repeat(403, 60), 429]);
    expect(responses.map((r) => limitHeaders(r).remaining)).toEqual([...Array.from({ length: 60 }, (_, i) => 59 - i), 0]);
    expect(responses[0]!.body).toEqual({ error: { code: 'forbidden', message: expect.stringContaining('agents:read'), requestId: expect.any(String) } });
    expect(responses[60]!.body).toEqual(RATE_LIMITED);
    expect(permitted.status).toBe(429);
  });

  it('when requests fail authentication, then they spend nothing of a key’s budget', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });
    const ip = newClientIp();
    const typo = `${apiKey.slice(0, -1)}${apiKey.endsWith('A') ? 'B' : 'A'}`;
    const failures = await sendMany(20, (i) =>
      hit(server, undefined, { ip, authorization: [`Basic ${apiKey}`, `Bearer ${typo}`, `Bearer ${apiKey} extra`, `Bearer`][i % 4]! }),
    );

    const response = await hit(server, apiKey);

    expect(statuses(failures)).toEqual(repeat(401, 20));
    expect(failures.every((r) => !r.headers.has('ratelimit-remaining'))).toBe(true);
    expect(response.status).toBe(200);
    expect(limitHeaders(response)).toMatchObject({ limit: 60, remaining: 59 });
  });
});

describe.skipIf(!redisUrl)('the window, with a short window length (needs Redis)', () => {
  const WINDOW_MS = 3_000;
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ config: { rateLimitWindowMs: WINDOW_MS, failedAuthLimit: 5, trustProxy: 'loopback' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when the window of a used-up key ends, then the key gets a fresh 60', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });
    const started = Date.now();
    const burst = await sendMany(61, () => hit(server, apiKey), 4);
    const burstMs = Date.now() - started;
    expect(burstMs, 'the burst must fit in one window for this test to mean anything').toBeLessThan(WINDOW_MS);
    expect(countOf(burst, 200)).toBe(60);
    expect(countOf(burst, 429)).toBe(1);
    const limited = await hit(server, apiKey);
    expect(limited.status).toBe(429);
    const retryAfter = limitHeaders(limited).retryAfter!;
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_MS / 1000);

    // The scenario: the window ends (Retry-After, bounded above by WINDOW_MS).
    await sleep(retryAfter * 1000 + 100);
    const afterWindow = await hit(server, apiKey);

    expect(afterWindow.status).toBe(200);
    expect(limitHeaders(afterWindow)).toEqual({ limit: 60, remaining: 59, reset: WINDOW_MS / 1000, retryAfter: undefined });
  });

  it('when the failed-authentication window of a blocked IP ends, then the IP may try again', async () => {
    const ip = newClientIp();
    const blocked = await sendMany(6, () => hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` }));
    expect(statuses(blocked)).toEqual([...repeat(401, 5), 429]);
    const retryAfter = limitHeaders(blocked[5]!).retryAfter!;

    // The scenario: the failed-authentication window ends (Retry-After).
    await sleep(retryAfter * 1000 + 100);
    const again = await hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` });

    expect(again.status).toBe(401);
  });
});

describe.skipIf(!redisUrl)('two instances on one Redis (needs Redis)', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    const shared = { redisPrefix: `sf-test:${randomUUID()}:`, failedAuthLimit: 5, trustProxy: 'loopback' as const };
    a = await startServer({ config: shared });
    b = await startServer({ config: shared, db: a.db });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('when a free key alternates between the instances, then they share one count of 60', async () => {
    const { apiKey } = await createWorkspace(a, { plan: 'free' });

    const responses = await sendMany(62, (i) => hit(i % 2 === 0 ? a : b, apiKey));

    expect(statuses(responses)).toEqual([...repeat(200, 60), 429, 429]);
    expect(responses.map((r) => limitHeaders(r).remaining)).toEqual([...Array.from({ length: 60 }, (_, i) => 59 - i), 0, 0]);
  });

  it('when an IP fails authentication on both instances, then the failures add up to one limit', async () => {
    const ip = newClientIp();
    const bad = { ip, authorization: `Bearer ${BAD_KEY}` };

    const responses = await sendMany(5, (i) => hit(i < 3 ? a : b, undefined, bad));
    const nextOnA = await hit(a, undefined, bad);
    const nextOnB = await hit(b, undefined, bad);

    expect(statuses(responses)).toEqual(repeat(401, 5));
    expect(nextOnA.status).toBe(429);
    expect(nextOnB.status).toBe(429);
  });
});

describe.skipIf(!redisUrl)('failed authentications per client IP (needs Redis)', () => {
  const LIMIT = 5;
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ config: { failedAuthLimit: LIMIT, trustProxy: 'loopback' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when an IP fails authentication past the limit, then its failures get 429 with Retry-After, and other IPs do not', async () => {
    const ip = newClientIp();
    const attempts = [undefined, 'Basic abc', `Bearer ${BAD_KEY}`, 'Bearer sfk_short', `Bearer ${BAD_KEY}`, `Bearer ${BAD_KEY}`];

    const responses = await sendMany(attempts.length, (i) => hit(server, undefined, { ip, ...(attempts[i] && { authorization: attempts[i] }) }));
    const laterFailures = await sendMany(attempts.length, (i) => hit(server, undefined, { ip, ...(attempts[i] && { authorization: attempts[i] }) }));
    const failureFromOtherIp = await hit(server, undefined, { ip: newClientIp(), authorization: `Bearer ${BAD_KEY}` });

    expect(statuses(responses)).toEqual([...repeat(401, LIMIT), 429]);
    expect(responses[0]!.body).toEqual(UNAUTHORIZED);
    expect(responses[LIMIT]!.body).toEqual(RATE_LIMITED);
    const retryAfter = limitHeaders(responses[LIMIT]!).retryAfter;
    expect(retryAfter).toBeGreaterThanOrEqual(WINDOW_S - 5);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_S);
    expect(statuses(laterFailures)).toEqual(repeat(429, attempts.length));
    expect(laterFailures.every((r) => limitHeaders(r).retryAfter! >= 1)).toBe(true);
    expect(failureFromOtherIp.status).toBe(401);
  });

  it('when an IP is throttled for failures, then a valid key from it is still served, counted against its own plan only', async () => {
    const ip = newClientIp();
    const enterprise = await createWorkspace(server, { plan: 'enterprise' });
    const free = await createWorkspace(server, { plan: 'free' });
    const throttled = await sendMany(LIMIT + 1, () => hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` }));
    expect(statuses(throttled)).toEqual([...repeat(401, LIMIT), 429]);

    const validEnterprise = await sendMany(3, () => hit(server, enterprise.apiKey, { ip }));
    const validFree = await hit(server, free.apiKey, { ip });
    const failureAgain = await hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` });
    const validFromOtherIp = await hit(server, enterprise.apiKey, { ip: newClientIp() });

    expect(statuses(validEnterprise)).toEqual(repeat(200, 3));
    expect(validFree.status).toBe(200);
    expect(limitHeaders(validFree)).toMatchObject({ limit: 60, remaining: 59 });
    expect(failureAgain.status).toBe(429);
    expect(failureAgain.body).toEqual(RATE_LIMITED);
    expect(validFromOtherIp.status).toBe(200);
  });

  it('when an IP has 200 successful requests, then they count nothing: it still has all its failed attempts', async () => {
    const ip = newClientIp();
    const { apiKey } = await createWorkspace(server, { plan: 'enterprise' });

    const successes = await sendMany(200, () => hit(server, apiKey, { ip }), 4);
    const failures = await sendMany(LIMIT + 1, () => hit(server, undefined, { ip, authorization: `Bearer ${BAD_KEY}` }));

    expect(countOf(successes, 200)).toBe(200);
    expect(statuses(failures)).toEqual([...repeat(401, LIMIT), 429]);
  });

  it('when failures come from many IPv6 addresses of one /56, then they count as one client', async () => {
    const network = `2001:db8:${(ipSequence++ % 0xffff).toString(16)}`;
    const bad = `Bearer ${BAD_KEY}`;

    const responses = await sendMany(LIMIT + 1, (i) => hit(server, undefined, { ip: `${network}:${i.toString(16)}::${i + 1}`, authorization: bad }));
    const otherNetwork = await hit(server, undefined, { ip: `2001:db9:${network.split(':')[2]}::1`, authorization: bad });

    expect(statuses(responses)).toEqual([...repeat(401, LIMIT), 429]);
    expect(otherNetwork.status).toBe(401);
  });
});

describe.skipIf(!redisUrl)('when Redis goes away and comes back (needs Redis)', () => {
  let redisServer: RedisServer;
  let server: LoggedServer;
  beforeAll(async () => {
    redisServer = await RedisServer.start();
    server = await startLoggedServer({ redisUrl: redisServer.url });
  });
  afterAll(async () => {
    await server?.close();
    redisServer?.thaw();
    await redisServer?.kill();
  });

  const MAX_MS = 200;
  /** Sends `count` requests one by one, timing each. */
  async function timed(count: number, apiKey: string): Promise<{ responses: RawResponse[]; slowest: number }> {
    let slowest = 0;
    const responses = await sendMany(count, async () => {
      const started = performance.now();
      const response = await hit(server, apiKey);
      slowest = Math.max(slowest, performance.now() - started);
      return response;
    });
    return { responses, slowest };
  }
  const readyz = () => request(server, 'GET', '/readyz');
  const outageWarnings = () => server.logs.matching(/^Redis unavailable/, LEVEL.warn);

  it('when requests are limited, then each costs one Redis round trip, and an enterprise request none', async () => {
    const free = await createWorkspace(server, { plan: 'free' });
    const enterprise = await createWorkspace(server, { plan: 'enterprise' });
    const probe = new Redis(redisServer.url);
    const monitor = await probe.monitor();
    const sent: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source !== 'lua') sent.push(args[0]!.toLowerCase());
    });
    /** The commands sent since the last call (an ECHO from the probe marks the point). */
    const takeSent = async (): Promise<string[]> => {
      await probe.call('ECHO', 'mark');
      await waitFor('the mark seen by MONITOR', () => sent.includes('echo'));
      return sent.splice(0).filter((name) => name !== 'echo');
    };
    try {
      // A fresh Redis does not know the script yet: its first use loads it with EVAL (both limiters run the same one).
      const firstLimited = await hit(server, free.apiKey);
      const firstFailed = await hit(server, undefined, { authorization: `Bearer ${BAD_KEY}` });
      const warmUp = await takeSent();

      const limited = await sendMany(60, () => hit(server, free.apiKey));
      const unlimited = await sendMany(10, () => hit(server, enterprise.apiKey));
      const failed = await sendMany(3, () => hit(server, undefined, { authorization: `Bearer ${BAD_KEY}` }));
      const steady = await takeSent();

      expect([firstLimited.status, firstFailed.status]).toEqual([200, 401]);
      expect(statuses(limited)).toEqual([...repeat(200, 59), 429]);
      expect(statuses(unlimited)).toEqual(repeat(200, 10));
      expect(statuses(failed)).toEqual(repeat(401, 3));
      expect(warmUp).toEqual(['evalsha', 'eval', 'evalsha']);
      expect(steady).toEqual(repeat('evalsha', 60 + 3));
    } finally {
      monitor.disconnect();
      probe.disconnect();
    }
  });

  it('when Redis is killed, then requests succeed at once and unlimited, /readyz says degraded; when it returns, limits apply again', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });
    const before = await sendMany(10, () => hit(server, apiKey));
    expect(statuses(before)).toEqual(repeat(200, 10));
    expect(limitHeaders(before[9]!).remaining).toBe(50);
    expect(outageWarnings()).toHaveLength(0);

    await redisServer.kill();
    const during = await timed(80, apiKey);
    const readyDuring = await readyz();
    const meDuring = await hit(server, apiKey, { path: '/v1/me' });

    expect(statuses(during.responses)).toEqual(repeat(200, 80));
    expect(during.slowest).toBeLessThan(MAX_MS);
    expect(readyDuring.status).toBe(200);
    expect(readyDuring.body).toEqual({ status: 'degraded', database: 'up', redis: 'down' });
    expect(meDuring.status).toBe(200);
    expect(meDuring.body).toMatchObject({ plan: 'free', rateLimit: null });
    expect(outageWarnings()).toHaveLength(1);

    await redisServer.restart();
    await waitFor('/readyz to report Redis up', async () => (await readyz()).body.redis === 'up');
    const after = await sendMany(61, () => hit(server, apiKey));

    expect(await readyz()).toMatchObject({ status: 200, body: { status: 'ok', database: 'up', redis: 'up' } });
    expect(statuses(after)).toEqual([...repeat(200, 60), 429]);
    expect(limitHeaders(after[0]!)).toMatchObject({ limit: 60, remaining: 59 });
    expect(outageWarnings()).toHaveLength(1);
    expect(server.logs.matching(/^Redis is back/, LEVEL.info)).toHaveLength(1);

    await redisServer.kill();
    const secondOutage = await timed(20, apiKey);
    await redisServer.restart();
    await waitFor('/readyz to report Redis up', async () => (await readyz()).body.redis === 'up');

    expect(statuses(secondOutage.responses)).toEqual(repeat(200, 20));
    expect(secondOutage.slowest).toBeLessThan(MAX_MS);
    expect(outageWarnings()).toHaveLength(2);
  });

  it('when Redis freezes, then requests wait at most the command timeout until the dead connection is dropped, then fail open at once', async () => {
    const { apiKey } = await createWorkspace(server, { plan: 'free' });
    const warningsBefore = outageWarnings().length;
    expect((await hit(server, apiKey)).status).toBe(200);

    redisServer.freeze();
    const detecting = await timed(3, apiKey);
    await waitFor('/readyz to report Redis down', async () => (await readyz()).body.redis === 'down', 5_000);
    const detected = await timed(60, apiKey);

    expect(statuses(detecting.responses)).toEqual(repeat(200, 3));
    expect(detecting.slowest).toBeLessThan(500 + MAX_MS);
    expect(statuses(detected.responses)).toEqual(repeat(200, 60));
    expect(detected.slowest).toBeLessThan(MAX_MS);
    expect(outageWarnings()).toHaveLength(warningsBefore + 1);

    redisServer.thaw();
    await waitFor('/readyz to report Redis up', async () => (await readyz()).body.redis === 'up');
    const after = await hit(server, apiKey);

    expect(after.status).toBe(200);
    expect(limitHeaders(after).limit).toBe(60);
  });

  it('when the service starts while Redis is down, then it serves requests and limits them once Redis is up', async () => {
    const lateRedis = await RedisServer.create();
    const late = await startLoggedServer({ redisUrl: lateRedis.url, waitForRedis: false });
    try {
      const { apiKey } = await createWorkspace(late, { plan: 'free' });
      const whileDown = await sendMany(5, () => hit(late, apiKey));

      await lateRedis.restart();
      await waitFor('/readyz to report Redis up', async () => (await request(late, 'GET', '/readyz')).body.redis === 'up');
      const afterStart = await sendMany(61, () => hit(late, apiKey));

      expect(statuses(whileDown)).toEqual(repeat(200, 5));
      expect(statuses(afterStart)).toEqual([...repeat(200, 60), 429]);
      expect(late.logs.matching(/^Redis unavailable/, LEVEL.warn)).toHaveLength(1);
    } finally {
      await late.close();
      await lateRedis.kill();
    }
  });

  it('when the service shuts down, then closing its own Redis connection is not reported as an outage', async () => {
    const closing = await startLoggedServer({ redisUrl: redisServer.url });

    await closing.close();
    // 'end': the client is done for good (a reconnect it planned would have come before it).
    await waitFor('the Redis client ended', () => closing.redis!.status === 'end');

    expect(closing.logs.matching(/^Redis unavailable/)).toHaveLength(0);
  });
});
