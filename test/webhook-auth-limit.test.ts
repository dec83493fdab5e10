// Failed checks on Meta's webhooks are limited per client and channel: after FAILED_AUTH_LIMIT bad
// signatures or verify tokens a client gets 429 before its body is read, on one instance or across
// instances sharing Redis; good signatures never count.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPhone, createWorkspace, request, type RawResponse } from './helpers/api.js';
import { createMetaChannel, type MetaChannel } from './helpers/channels.js';
import { checkResponse } from './helpers/contract.js';
import { metaSignature, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { LEVEL, LogCapture, RedisServer } from './helpers/processes.js';
import { redisUrl, startServer, type TestServer } from './helpers/server.js';

const LIMIT = 3;
const WINDOW_S = 60;
const MIB = 1024 * 1024;
const BAD_SIGNATURE = `sha256=${'0'.repeat(64)}`;
const RATE_LIMITED = { error: { code: 'rate_limited', message: expect.stringMatching(/^Too many failed authentications/), requestId: expect.any(String) } };
const INVALID_SIGNATURE = { error: { code: 'invalid_signature', message: expect.any(String), requestId: expect.any(String) } };

let ipSequence = 0;
/** A client address of its own for each test (the servers trust X-Forwarded-For from loopback). */
const newClientIp = (): string => `192.0.2.${(ipSequence++ % 250) + 1}`;

const webhookPath = (channelId: string): string => `/webhooks/meta/${channelId}`;

/** A WhatsApp text delivery to the channel, its bytes and its message id. */
function delivery(meta: MetaChannel): { body: string; messageId: string } {
  const inbound = whatsappText(buildPhone().slice(1), 'Oi! Meu pedido 4521 ainda não chegou.', 'Mariana Silva');
  return { body: JSON.stringify(whatsappDelivery(meta.externalId, inbound)), messageId: inbound.id };
}

/** POSTs `body` to the channel's webhook from `ip`, signed with `signature` (none when null). */
const post = (server: TestServer, channelId: string, ip: string, body: string, signature: string | null): Promise<RawResponse> =>
  request(server, 'POST', webhookPath(channelId), {
    headers: { 'content-type': 'application/json', 'x-forwarded-for': ip, ...(signature !== null && { 'x-hub-signature-256': signature }) },
    rawBody: body,
  });

const postSigned = (server: TestServer, meta: MetaChannel, ip: string) => {
  const { body, messageId } = delivery(meta);
  return post(server, meta.channel.id, ip, body, metaSignature(meta.appSecret, body)).then((res) => ({ res, messageId }));
};

const postBad = (server: TestServer, meta: MetaChannel, ip: string, channelId = meta.channel.id) =>
  post(server, channelId, ip, delivery(meta).body, BAD_SIGNATURE);

const verify = (server: TestServer, meta: MetaChannel, ip: string, token: string) =>
  request(server, 'GET', `${webhookPath(meta.channel.id)}?hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=1158201444`, {
    headers: { 'x-forwarded-for': ip },
  });

async function sequentially<T>(count: number, send: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let i = 0; i < count; i++) results.push(await send(i));
  return results;
}

const statuses = (responses: RawResponse[]): number[] => responses.map((r) => r.status);

const storedMessageIds = async (server: TestServer, meta: MetaChannel): Promise<string[]> =>
  (await server.db.selectFrom('messages').select('external_id').where('channel_id', '=', meta.channel.id).orderBy('created_at').execute()).map(
    (m) => m.external_id!,
  );

interface PartialAnswer extends RawResponse {
  /** Resolves once the server has closed the connection. */
  closed: Promise<void>;
}

/**
 * Sends a POST's headers announcing a 1 MiB body, then only its first 64 KiB, and resolves with the
 * answer the server gives meanwhile: an answer at all proves it did not wait for the rest. Rejects
 * when none comes within `timeoutMs`.
 */
function postWithoutMostOfTheBody(server: TestServer, channelId: string, ip: string, timeoutMs = 5_000): Promise<PartialAnswer> {
  const { hostname, port } = new URL(server.baseUrl);
  const socket = net.connect(Number(port), hostname);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {}); // the server may reset a connection whose body it never read
  return new Promise<PartialAnswer>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms while most of the body was unsent: the server waited for it`));
    }, timeoutMs);
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = received.subarray(0, end).toString('latin1').split('\r\n');
      const headers = new Headers(lines.map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()] as [string, string]));
      const text = received.subarray(end + 4).toString('utf8');
      if (Buffer.byteLength(text) < Number(headers.get('content-length') ?? 0)) return;
      clearTimeout(timer);
      const status = Number(statusLine!.split(' ')[1]);
      const body: unknown = JSON.parse(text);
      checkResponse('POST', `${server.baseUrl}${webhookPath(channelId)}`, status, headers, body);
      resolve({ status, headers, body, closed });
    });
    socket.write(
      `POST ${webhookPath(channelId)} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\n` +
        `X-Hub-Signature-256: ${BAD_SIGNATURE}\r\nX-Forwarded-For: ${ip}\r\nContent-Length: ${MIB}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(64 * 1024, 'x'));
  });
}

/** Resolves when `closed` does, rejects after `timeoutMs`: the server keeps the connection open. */
const within = (closed: Promise<void>, timeoutMs = 2_000): Promise<void> =>
  Promise.race([closed, new Promise<void>((_, reject) => setTimeout(() => reject(new Error('the server kept the connection open')), timeoutMs))]);

/** The tests that hold for either store of the counts. */
function limitsPerClientAndChannel(start: () => Promise<{ server: TestServer; logs: LogCapture }>): void {
  let server: TestServer;
  let logs: LogCapture;
  beforeAll(async () => {
    ({ server, logs } = await start());
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when a client has sent FAILED_AUTH_LIMIT bad signatures, then its next request gets 429 rate_limited with Retry-After before its body is sent', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();
    // Case variants of the id name the same channel, and share its count.
    const ids = [meta.channel.id, meta.channel.id.toUpperCase()];

    const failures = await sequentially(LIMIT, (i) => postBad(server, meta, ip, ids[i % 2]));
    const started = Date.now();
    const unread = await postWithoutMostOfTheBody(server, meta.channel.id.toUpperCase(), ip);
    const answeredInMs = Date.now() - started;
    const later = await postBad(server, meta, ip);

    expect(statuses(failures)).toEqual(new Array<number>(LIMIT).fill(401));
    expect(failures[0]!.body).toEqual(INVALID_SIGNATURE);
    expect(unread.status).toBe(429);
    expect(unread.body).toEqual(RATE_LIMITED);
    expect(answeredInMs).toBeLessThan(1_000);
    const retryAfter = Number(unread.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(WINDOW_S - 5);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_S);
    expect(unread.headers.get('connection')).toBe('close');
    await within(unread.closed);
    expect(later.status).toBe(429);
    expect(later.body).toEqual(RATE_LIMITED);
    expect(await storedMessageIds(server, meta)).toEqual([]);
  });

  it('when a client is blocked on a channel, then its good deliveries to another channel, and other clients’ good deliveries to that one, are stored', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const other = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();
    const failures = await sequentially(LIMIT + 1, () => postBad(server, meta, ip));
    expect(statuses(failures)).toEqual([...new Array<number>(LIMIT).fill(401), 429]);

    const fromOtherClient = await postSigned(server, meta, newClientIp());
    const toOtherChannel = await postSigned(server, other, ip);

    expect([fromOtherClient.res.status, toOtherChannel.res.status]).toEqual([200, 200]);
    expect(await storedMessageIds(server, meta)).toEqual([fromOtherClient.messageId]);
    expect(await storedMessageIds(server, other)).toEqual([toOtherChannel.messageId]);
  });

  it('when a client sends good signatures among its bad ones, then the good ones are stored and never count', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();

    const before = await sequentially(LIMIT - 1, () => postBad(server, meta, ip));
    const good = await sequentially(3 * LIMIT, () => postSigned(server, meta, ip));
    const last = await postBad(server, meta, ip);
    const missing = await post(server, meta.channel.id, ip, delivery(meta).body, null);

    expect(statuses([...before, ...good.map((g) => g.res), last, missing])).toEqual([
      ...new Array<number>(LIMIT - 1).fill(401),
      ...new Array<number>(3 * LIMIT).fill(200),
      401,
      429,
    ]);
    expect(await storedMessageIds(server, meta)).toEqual(good.map((g) => g.messageId));
  });

  it('when a client sends wrong verify tokens, then they count too: after the limit its verifications and deliveries to the channel get 429', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();

    const guesses = await sequentially(LIMIT + 1, (i) => verify(server, meta, ip, `guess-${i}`));
    const rightToken = await verify(server, meta, ip, meta.verifyToken);
    const signed = await postSigned(server, meta, ip);
    const otherClient = await verify(server, meta, newClientIp(), meta.verifyToken);

    expect(statuses(guesses)).toEqual([...new Array<number>(LIMIT).fill(403), 429]);
    expect(guesses[LIMIT]!.body).toEqual(RATE_LIMITED);
    // Refused before anything is checked: the client has used up its attempts on this channel.
    expect([rightToken.status, signed.res.status]).toEqual([429, 429]);
    expect(otherClient.status).toBe(200);
    expect(otherClient.body).toBe(1158201444);
  });

  it('when a client is throttled, then one warning names it and the channel', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();

    await sequentially(LIMIT + 3, () => postBad(server, meta, ip));

    const warnings = logs.matching(/^client throttled: too many bad signatures/, LEVEL.warn).filter((line) => line.ip === ip);
    expect(warnings).toEqual([expect.objectContaining({ ip, client: ip, channelId: meta.channel.id, failures: LIMIT, retryAfterSeconds: expect.any(Number) })]);
  });
}

async function startLogged(redis: string | false | undefined, prefix?: string): Promise<{ server: TestServer; logs: LogCapture }> {
  const logs = new LogCapture();
  const server = await startServer({
    redisUrl: redis,
    logs: logs.destination,
    config: { failedAuthLimit: LIMIT, trustProxy: 'loopback', ...(prefix && { redisPrefix: prefix }) },
  });
  return { server, logs };
}

describe('webhook checks limited, counted in process', () => {
  limitsPerClientAndChannel(() => startLogged(false));
});

describe.skipIf(!redisUrl)('webhook checks limited, counted in Redis (needs Redis)', () => {
  limitsPerClientAndChannel(() => startLogged(undefined));
});

describe('webhook answers given before the body is read', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ redisUrl: false, config: { trustProxy: 'loopback' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('when the channel is unknown, then the 404 comes without the body and the connection is closed rather than drained', async () => {
    const unknown = await postWithoutMostOfTheBody(server, '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f', newClientIp());

    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('connection')).toBe('close');
    await within(unknown.closed);
  });
});

describe.skipIf(!redisUrl)('two instances on one Redis (needs Redis)', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    const prefix = `sf-test:${randomUUID()}:`;
    a = (await startLogged(undefined, prefix)).server;
    b = await startServer({ db: a.db, config: { failedAuthLimit: LIMIT, trustProxy: 'loopback', redisPrefix: prefix } });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('when bad signatures alternate between the instances, then they add up to one limit, and the instance that did not see the last one refuses before the body too', async () => {
    const ws = await createWorkspace(a);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();
    const instanceOf = (i: number): TestServer => ((LIMIT - 1 - i) % 2 === 0 ? a : b);

    const failures = await sequentially(LIMIT, (i) => postBad(instanceOf(i), meta, ip));
    const unreadOnB = await postWithoutMostOfTheBody(b, meta.channel.id, ip);
    const unreadOnA = await postWithoutMostOfTheBody(a, meta.channel.id, ip);
    const goodFromOtherClientOnB = await postSigned(b, meta, newClientIp());

    expect(statuses(failures)).toEqual(new Array<number>(LIMIT).fill(401));
    expect([unreadOnB.status, unreadOnA.status]).toEqual([429, 429]);
    expect(unreadOnB.body).toEqual(RATE_LIMITED);
    await within(unreadOnB.closed);
    expect(goodFromOtherClientOnB.res.status).toBe(200);
    expect(await storedMessageIds(a, meta)).toEqual([goodFromOtherClientOnB.messageId]);
  });
});

describe.skipIf(!redisUrl)('webhook checks while Redis is down (needs Redis)', () => {
  let redis: RedisServer;
  let server: TestServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
    server = await startServer({ redisUrl: redis.url, config: { failedAuthLimit: LIMIT, trustProxy: 'loopback' } });
    await redis.kill();
  });
  afterAll(async () => {
    await server?.close();
    await redis?.kill();
  });

  it('when Redis is down, then failures are not limited (fail open) and good deliveries are stored', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();

    const failures = await sequentially(LIMIT + 2, () => postBad(server, meta, ip));
    const good = await postSigned(server, meta, ip);

    expect(statuses(failures)).toEqual(new Array<number>(LIMIT + 2).fill(401));
    expect(good.res.status).toBe(200);
    expect(await storedMessageIds(server, meta)).toEqual([good.messageId]);
  });
});
