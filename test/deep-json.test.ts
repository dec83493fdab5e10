// Deeply nested JSON: however deep, in whatever shape, escaped or compressed, a body is refused in the
// error shape (400 invalid_json past MAX_JSON_DEPTH, 413 past 1 MiB), stores nothing, and the process
// goes on serving; the same through the mock's front, and a signed Meta delivery is dropped unparsed.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMockFront } from '../scripts/mock-front.js';
import type { Db } from '../src/db/database.js';
import { MAX_JSON_DEPTH } from '../src/json-scan.js';
import { createLogger } from '../src/logger.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { buildContact, buildPhone, createWorkspace, request, type RawResponse, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { whatsappDelivery, whatsappText } from './helpers/graph.js';
import { closeServer, freePort, LogCapture } from './helpers/processes.js';
import { databaseUrl, openDatabase, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';
import { alive, Service, START_MS } from './helpers/service.js';

const ONE_MIB = 1024 * 1024;
const TOO_DEEP = {
  error: { code: 'invalid_json', message: `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`, requestId: expect.any(String) },
};
const TOO_LARGE = { error: { code: 'payload_too_large', message: 'The request body is larger than 1 MiB.', requestId: expect.any(String) } };
const LONE = 'holds a lone surrogate (an unpaired \\uD800-\\uDFFF escape)';

type Shape = 'arrays' | 'objects';
const LEAVES = { 'a lone surrogate escape': '"\\ud800"', 'plain text': '"x"' } as const;
type Leaf = keyof typeof LEAVES;

/** `leaf` inside `depth` arrays (`[[["x"]]]`) or objects (`{"a":{"a":"x"}}`), as JSON text. */
function nested(shape: Shape, depth: number, leaf: string): string {
  return shape === 'arrays' ? `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`;
}

/** What the service answers a body: 413 past 1 MiB (read first), else 400 for its depth. */
const refusalOf = (text: string) => (Buffer.byteLength(text) > ONE_MIB ? { status: 413, body: TOO_LARGE } : { status: 400, body: TOO_DEEP });

let server: TestServer;
let ws: TestWorkspace;
const logs = new LogCapture();
beforeAll(async () => {
  server = await startServer({ logs: logs.destination });
  ws = await createWorkspace(server);
});
afterAll(async () => {
  await server.close();
});

const contactCount = async (workspaceId: string) =>
  (
    await server.db
      .selectFrom('contacts')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow()
  ).n;

function postContact(rawBody: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  return request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': 'application/json', ...headers } });
}

describe('POST /contacts with a deeply nested body', () => {
  const cases: Array<[Shape, number, Leaf, boolean, boolean]> = [];
  for (const depth of [MAX_JSON_DEPTH + 1, 100, 5_000, 50_000, 400_000])
    for (const shape of ['arrays', 'objects'] as const)
      for (const leaf of Object.keys(LEAVES) as Leaf[])
        for (const withKey of [false, true]) for (const gzip of [false, true]) cases.push([shape, depth, leaf, withKey, gzip]);

  it.each(cases)(
    'when it nests %s %i levels deep around %s (Idempotency-Key: %s, gzip: %s), then it is refused, nothing is stored and the next request is served',
    async (shape, depth, leaf, withKey, gzip) => {
      const text = nested(shape, depth, LEAVES[leaf]);
      const key: Record<string, string> = withKey ? { 'idempotency-key': randomUUID() } : {};
      const encoding: Record<string, string> = gzip ? { 'content-encoding': 'gzip' } : {};
      const before = await contactCount(ws.workspaceId);

      const refused = await postContact(gzip ? zlib.gzipSync(text) : text, { ...key, ...encoding });
      const after = await contactCount(ws.workspaceId);
      const next = await postContact(JSON.stringify(buildContact()), key);

      expect({ status: refused.status, body: refused.body }).toEqual(refusalOf(text));
      expect(after).toBe(before);
      // Served by the same process, and the refusal left nothing under its Idempotency-Key.
      expect(next.status).toBe(201);
      expect(next.headers.get('idempotent-replayed')).toBeNull();
    },
  );

  it('when a deep array hides in a field of an otherwise valid contact, then it is refused the same way', async () => {
    const before = await contactCount(ws.workspaceId);

    const refused = await postContact(`{"name":"Ana","phone":${nested('arrays', 5_000, '"\\ud800"')}}`);

    expect(refused.status).toBe(400);
    expect(refused.body).toEqual(TOO_DEEP);
    expect(await contactCount(ws.workspaceId)).toBe(before);
  });

  it(`when it nests exactly ${MAX_JSON_DEPTH} levels, then the body check lets it through and the contract refuses it`, async () => {
    const before = await contactCount(ws.workspaceId);

    const refused = await postContact(`{"name":${nested('arrays', MAX_JSON_DEPTH - 1, '"x"')}}`);

    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/name', message: 'must be string' }],
        requestId: expect.any(String),
      },
    });
    expect(await contactCount(ws.workspaceId)).toBe(before);
  });

  it(`when a lone surrogate sits ${MAX_JSON_DEPTH} levels deep, then the 400 names its place`, async () => {
    const refused = await postContact(`{"name":${nested('arrays', MAX_JSON_DEPTH - 1, '"\\ud800"')}}`);

    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request body is not valid Unicode text.',
        details: [{ path: `/body/name${'/0'.repeat(MAX_JSON_DEPTH - 1)}`, message: LONE }],
        requestId: expect.any(String),
      },
    });
  });

  it('when brackets and escaped quotes sit inside strings, then they do not count as nesting', async () => {
    const name = `${'['.repeat(MAX_JSON_DEPTH + 10)}\\"{{{`;

    const created = await postContact(JSON.stringify({ name: JSON.parse(`"${name}"`) }));

    expect(created.status).toBe(201);
    expect(created.body.name).toBe(`${'['.repeat(MAX_JSON_DEPTH + 10)}"{{{`);
  });

  it.each(['utf-16', 'utf-16le', 'utf-32'])(
    'when the charset is %s, then it answers 415 (the body is read as UTF-8 only) and stores nothing',
    async (charset) => {
      const before = await contactCount(ws.workspaceId);

      const refused = await postContact(Buffer.from(JSON.stringify(buildContact()), 'utf16le'), { 'content-type': `application/json; charset=${charset}` });

      expect(refused.status).toBe(415);
      expect(refused.body).toEqual({
        error: { code: 'unsupported_media_type', message: 'Send the body as application/json in UTF-8.', requestId: expect.any(String) },
      });
      expect(await contactCount(ws.workspaceId)).toBe(before);
    },
  );
});

describe('query strings', () => {
  // src/query.ts reads `a[b][c]` as one flat name; the validator then reads bracketed names again
  // with qs, whose nesting depth has a small default bound: either way, one unknown parameter `a`.
  it('when a parameter name nests brackets thousands deep, then it is one unknown parameter (400)', async () => {
    const response = await request(server, 'GET', `/v1/contacts?a${'[b]'.repeat(2_000)}=1`, { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/query/a', message: "Unknown query parameter 'a'" }],
        requestId: expect.any(String),
      },
    });
  });
});

describe("the mock's front (npm run mock)", () => {
  let front: http.Server;
  let baseUrl: string;
  beforeAll(async () => {
    // Refusals are answered before Prism is asked: no Prism behind it here.
    const app = createMockFront({ prismUrl: `http://127.0.0.1:${await freePort()}`, logger: createLogger('silent') });
    front = http.createServer(app);
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await closeServer(front);
  });

  it.each([
    ['arrays', 5_000],
    ['objects', 5_000],
    ['arrays', 400_000],
    ['objects', 400_000],
  ] as const)(
    'when the body nests %s %i levels deep around a lone surrogate, then it is refused as the service refuses it and the mock goes on answering',
    async (shape, depth) => {
      const text = nested(shape, depth, '"\\ud800"');
      const headers = { 'content-type': 'application/json' };

      const refused = await request({ baseUrl }, 'POST', '/v1/contacts', { apiKey: `sfk_${'Mock0key1'.repeat(5)}`, rawBody: text, headers });
      const next = await request({ baseUrl }, 'POST', '/v1/contacts', { apiKey: `sfk_${'Mock0key1'.repeat(5)}`, body: { phone: buildPhone() } });

      expect({ status: refused.status, body: refused.body }).toEqual(refusalOf(text));
      expect(next.status).toBe(400);
      expect(next.body.error.details).toEqual([{ path: '/body/name', message: "must have required property 'name'" }]);
    },
  );
});

describe('POST /webhooks/meta/{channelId} with a deeply nested signed body', () => {
  let meta: MetaChannel;
  beforeAll(async () => {
    meta = await createMetaChannel(ws, 'whatsapp');
  });
  const notUnderstood = () =>
    logs.lines.filter((l) => l.msg === 'webhook delivery not understood; stored nothing' && l.channelId === meta.channel.id).map((l) => l.object);
  const inboundCount = async () =>
    (
      await server.db
        .selectFrom('messages')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('channel_id', '=', meta.channel.id)
        .executeTakeFirstOrThrow()
    ).n;

  it.each([
    ['arrays', 100],
    ['arrays', 5_000],
    ['arrays', 400_000],
    ['objects', 100_000],
  ] as const)(
    'when it nests %s %i levels deep, then it answers 200, is not parsed, stores nothing and is logged; the next delivery is stored',
    async (shape, depth) => {
      const logged = notUnderstood().length;
      const before = await inboundCount();

      const deep = await postWebhook(server, meta.channel.id, undefined, { appSecret: meta.appSecret, rawBody: nested(shape, depth, '"\\ud800"') });
      const next = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, whatsappText(buildPhone().slice(1), 'Oi')), {
        appSecret: meta.appSecret,
      });

      expect([deep.status, deep.body]).toEqual([200, { received: true }]);
      expect(notUnderstood().slice(logged)).toEqual([`nested deeper than ${MAX_JSON_DEPTH} levels`]);
      expect(next.status).toBe(200);
      expect(await inboundCount()).toBe(before + 1);
    },
  );

  it('when a deep part hides in an otherwise valid delivery, then the whole delivery is dropped, as no delivery of Meta nests so deep', async () => {
    const logged = notUnderstood().length;
    const before = await inboundCount();
    const delivery = whatsappDelivery(meta.externalId, whatsappText(buildPhone().slice(1), 'Oi'));
    const rawBody = JSON.stringify(delivery).replace('"type":"text"', `"type":"text","extra":${nested('arrays', MAX_JSON_DEPTH, '1')}`);

    const deep = await postWebhook(server, meta.channel.id, undefined, { appSecret: meta.appSecret, rawBody });

    expect(deep.status).toBe(200);
    expect(notUnderstood().slice(logged)).toEqual([`nested deeper than ${MAX_JSON_DEPTH} levels`]);
    expect(await inboundCount()).toBe(before);
  });
});

describe.skipIf(!databaseUrl)('node src/server.ts, as operators run it (needs PostgreSQL)', () => {
  let own: OwnDatabase;
  let db: Db;
  let service: Service;
  let port: number;
  beforeAll(async () => {
    // Its job workers take every job of their database: one of its own.
    own = await ownDatabase();
    db = await openDatabase(own.url);
    port = await freePort();
    service = new Service(port, { DATABASE_URL: own.url });
    await service.waitForListening(1);
  }, START_MS + 10_000);
  afterAll(async () => {
    await service?.kill();
    await db?.destroy();
    await own?.drop();
  });

  it("when a key sends the probe's 10 KB body (5,000 arrays around \\ud800), then it gets a 400 and the same process serves the next request", async () => {
    const { apiKey } = await provision(db, { plan: 'pro', scopes: [...SCOPES] });
    const target = { baseUrl: `http://127.0.0.1:${port}` } as TestServer;
    const pid = service.listening()[0]!;

    const refused = await request(target, 'POST', '/v1/contacts', {
      apiKey,
      rawBody: nested('arrays', 5_000, '"\\ud800"'),
      headers: { 'content-type': 'application/json' },
    });
    const next = await request(target, 'POST', '/v1/contacts', { apiKey, body: buildContact() });

    expect({ status: refused.status, body: refused.body }).toEqual({ status: 400, body: TOO_DEEP });
    expect(next.status).toBe(201);
    expect(service.running).toBe(true);
    expect(alive(pid)).toBe(true);
  });
});
