// Bad input: whatever a client sends, the answer is a 4xx in the error shape and nothing is stored.
import zlib from 'node:zlib';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAgent, buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const NUL = '\u0000';
const NUL_PATTERN = 'must match pattern "^[^\\u0000]*$"';
/** A malformed UUID is one problem, reported once. */
const UUID_DETAILS = (path: string) => [{ path, message: 'must match format "uuid"' }];
const validationError = (details: Array<{ path: string; message: string }>) => ({
  error: { code: 'validation_error', message: 'The request does not match the contract.', details, requestId: expect.any(String) },
});
const INVALID_JSON = { error: { code: 'invalid_json', message: 'The request body is not valid JSON.', requestId: expect.any(String) } };
const NOT_JSON = { error: { code: 'unsupported_media_type', message: 'Send the body as application/json.', requestId: expect.any(String) } };
const NOT_UTF8 = { error: { code: 'unsupported_media_type', message: 'Send the body as application/json in UTF-8.', requestId: expect.any(String) } };
const TOO_LARGE = { error: { code: 'payload_too_large', message: 'The request body is larger than 1 MiB.', requestId: expect.any(String) } };
const OVER_ONE_MIB = JSON.stringify({ ...buildAgent(), instructions: 'x'.repeat(1024 * 1024) });

interface Arranged extends TestWorkspace {
  agentId: string;
  contactId: string;
  channelId: string;
}

/** A workspace that already holds one agent, one contact, one thread and one message. */
async function arrange(): Promise<Arranged> {
  const ws = await createWorkspace(server);
  const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });
  const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
  const channelId = ws.channels[0]!.id;
  const { response } = await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId, content: 'Olá!' } });
  expect(response.status).toBe(201);
  return { ...ws, agentId: agent!.id, contactId: contact!.id, channelId };
}

/** Every row of the workspace's tenant tables, so "nothing changed" covers updates as well as inserts. */
async function snapshot(workspaceId: string) {
  const count = async (table: 'agents' | 'contacts' | 'threads' | 'messages') =>
    (
      await server.db
        .selectFrom(table)
        .select(sql<number>`count(*)::int`.as('n'))
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirstOrThrow()
    ).n;
  return {
    counts: { agents: await count('agents'), contacts: await count('contacts'), threads: await count('threads'), messages: await count('messages') },
    agents: await server.db.selectFrom('agents').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
  };
}

const EXPECTED_COUNTS = { agents: 1, contacts: 1, threads: 1, messages: 1 };

describe('POST /agents', () => {
  it.each([
    ['an unknown field', { ...buildAgent(), extra: 1 }, [{ path: '/body/extra', message: 'must NOT have additional properties' }]],
    ['a number as name', { ...buildAgent(), name: 123 }, [{ path: '/body/name', message: 'must be string' }]],
    ['an array as instructions', { ...buildAgent(), instructions: ['a'] }, [{ path: '/body/instructions', message: 'must be string' }]],
    ['null as model', { ...buildAgent(), model: null }, [{ path: '/body/model', message: 'must be string' }]],
    ['a status (not writable on create)', { ...buildAgent(), status: 'inactive' }, [{ path: '/body/status', message: 'must NOT have additional properties' }]],
    ['a name of 121 characters', buildAgent({ name: 'a'.repeat(121) }), [{ path: '/body/name', message: 'must NOT have more than 120 characters' }]],
    ['an empty name', buildAgent({ name: '' }), [{ path: '/body/name', message: 'must NOT have fewer than 1 characters' }]],
    ['a NUL byte in name', buildAgent({ name: `Ana${NUL}` }), [{ path: '/body/name', message: NUL_PATTERN }]],
    ['a NUL byte in instructions', buildAgent({ instructions: `${NUL}` }), [{ path: '/body/instructions', message: NUL_PATTERN }]],
    ['a NUL byte in model', buildAgent({ model: `gpt${NUL}4o` }), [{ path: '/body/model', message: NUL_PATTERN }]],
    ['no instructions', { name: 'Ana', model: 'gpt-4o' }, [{ path: '/body/instructions', message: "must have required property 'instructions'" }]],
    ['an array', [buildAgent()], [{ path: '/body', message: 'must be object' }]],
  ])('when the body has %s, then it answers 400 validation_error and stores nothing', async (_label, body, details) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, body });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(details));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
    expect(before.counts).toEqual(EXPECTED_COUNTS);
  });

  it('when the name has exactly 120 characters, then it is accepted (the limit is inclusive)', async () => {
    const ws = await arrange();

    const { data, response } = await ws.api.POST('/agents', { body: buildAgent({ name: 'a'.repeat(120) }) });

    expect(response.status).toBe(201);
    expect(data!.name).toBe('a'.repeat(120));
    expect((await snapshot(ws.workspaceId)).counts).toEqual({ ...EXPECTED_COUNTS, agents: 2 });
  });

  it.each(['"x"', '1', 'null'])('when the body is the JSON scalar %s, then it answers 400 and stores nothing', async (rawBody) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': 'application/json' } });

    expect(response.status).toBe(400);
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  // A scalar is well-formed JSON that breaks the contract, like [] does: the body check (step 5 of the
  // contract's order of checks) passes it and contract validation (step 6) makes it a validation_error.
  it.each(['"x"', '1', 'null'])('when the body is the JSON scalar %s, then the code is validation_error on /body', async (rawBody) => {
    const ws = await arrange();

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': 'application/json' } });

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: { code: 'validation_error', details: [{ path: '/body' }] } });
  });

  it.each([
    ['the JSON is cut short', '{"name": "Ana", "instructions":', 'application/json', 400, INVALID_JSON],
    ['the JSON has a trailing comma', '{"name": "Ana",}', 'application/json', 400, INVALID_JSON],
    ['the content type is text/plain', JSON.stringify(buildAgent()), 'text/plain', 415, NOT_JSON],
    ['the content type is form-encoded', 'name=Ana&instructions=x&model=y', 'application/x-www-form-urlencoded', 415, NOT_JSON],
    ['the charset is latin1', JSON.stringify(buildAgent()), 'application/json; charset=latin1', 415, NOT_UTF8],
    ['the body is over 1 MiB', OVER_ONE_MIB, 'application/json', 413, TOO_LARGE],
  ])('when %s, then it answers the error and stores nothing', async (_label, rawBody, contentType, status, body) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': contentType } });

    expect(response.status).toBe(status);
    expect(response.body).toEqual(body);
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it('when the charset is utf-8, then the body is accepted', async () => {
    const ws = await arrange();

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: JSON.stringify(buildAgent({ name: 'Ana Atenção' })),
      headers: { 'content-type': 'application/json; charset=UTF-8' },
    });

    expect(response.status).toBe(201);
    expect(response.body.name).toBe('Ana Atenção');
    expect((await snapshot(ws.workspaceId)).counts).toEqual({ ...EXPECTED_COUNTS, agents: 2 });
  });
});

describe('body encodings and text', () => {
  const agentJson = () => JSON.stringify(buildAgent({ name: 'Ana Atenção' }));
  const notDecodable = (encoding: string) => ({
    error: { code: 'invalid_json', message: `The request body could not be decoded as Content-Encoding: ${encoding}.`, requestId: expect.any(String) },
  });
  const invalidText = (path: string, message: string) => ({
    error: { code: 'validation_error', message: 'The request body is not valid Unicode text.', details: [{ path, message }], requestId: expect.any(String) },
  });
  const LONE = 'holds a lone surrogate (an unpaired \\uD800-\\uDFFF escape)';

  it.each([
    ['gzip', (b: Buffer) => zlib.gzipSync(b)],
    ['deflate', (b: Buffer) => zlib.deflateSync(b)],
    ['br', (b: Buffer) => zlib.brotliCompressSync(b)],
  ])('when the body is really %s-encoded, then it is decoded and stored', async (encoding, encode) => {
    const ws = await arrange();

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: encode(Buffer.from(agentJson())),
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
    });

    expect(response.status).toBe(201);
    expect(response.body.name).toBe('Ana Atenção');
  });

  it.each(['gzip', 'deflate', 'br'])('when Content-Encoding is %s but the body is plain JSON, then 400 and nothing is stored', async (encoding) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: agentJson(),
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(notDecodable(encoding));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it('when a gzip body is cut short, then 400 and nothing is stored', async () => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);
    const gzipped = zlib.gzipSync(Buffer.from(agentJson()));

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: gzipped.subarray(0, gzipped.length - 12),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });

    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_json');
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it.each(['compress', 'x-unknown'])('when Content-Encoding is %s, then 415 and nothing is stored', async (encoding) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: agentJson(),
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
    });

    expect(response.status).toBe(415);
    expect(response.body).toEqual(NOT_UTF8);
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it.each([
    ['a stray continuation byte', Buffer.concat([Buffer.from('{"name":"Ana '), Buffer.from([0x80]), Buffer.from('","instructions":"x","model":"m"}')]), 13],
    ['a truncated sequence', Buffer.concat([Buffer.from('{"name":"Jo'), Buffer.from([0xc3]), Buffer.from('o","instructions":"x","model":"m"}')]), 11],
    ['an overlong encoding', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('","instructions":"x","model":"m"}')]), 9],
    [
      'a UTF-8-encoded surrogate',
      Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","instructions":"x","model":"m"}')]),
      9,
    ],
    ['latin1 text', Buffer.from('{"name":"Conceição","instructions":"x","model":"m"}', 'latin1'), 15],
  ])('when the body holds %s, then 400 validation_error names the byte and nothing is stored', async (_label, rawBody, byte) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': 'application/json' } });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(invalidText('/body', `is not valid UTF-8 (byte ${byte})`));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it.each([
    ['a lone high surrogate in name', '{"name":"Ana \\ud800","instructions":"x","model":"m"}', '/body/name'],
    ['a lone low surrogate in instructions', '{"name":"Ana","instructions":"x\\uDC00y","model":"m"}', '/body/instructions'],
    ['reversed surrogates', '{"name":"\\udc00\\ud800","instructions":"x","model":"m"}', '/body/name'],
    // The answer holds no lone surrogate itself: U+FFFD stands in for it in the key's path.
    ['a lone surrogate in a key', '{"name":"Ana","instructions":"x","model":"m","\\ud800":1}', '/body/\ufffd'],
  ])('when the JSON holds %s, then 400 validation_error names it and nothing is stored', async (_label, rawBody, path) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/agents', { apiKey: ws.apiKey, rawBody, headers: { 'content-type': 'application/json' } });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(invalidText(path, LONE));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it('when the JSON holds an escaped surrogate pair and emoji, then the text is stored exactly', async () => {
    const ws = await arrange();

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      rawBody: '{"name":"Ana \\ud83d\\ude00 😀","instructions":"x","model":"m"}',
      headers: { 'content-type': 'application/json' },
    });

    expect(response.status).toBe(201);
    expect(response.body.name).toBe('Ana 😀 😀');
  });
});

describe('PATCH /agents/{id}', () => {
  it.each([
    ['an unknown field', { name: 'Bia', extra: true }, [{ path: '/body/extra', message: 'must NOT have additional properties' }]],
    ['an unknown status', { status: 'paused' }, [{ path: '/body/status', message: 'must be equal to one of the allowed values: active, inactive' }]],
    ['a number as model', { model: 4 }, [{ path: '/body/model', message: 'must be string' }]],
    ['a name of 121 characters', { name: 'b'.repeat(121) }, [{ path: '/body/name', message: 'must NOT have more than 120 characters' }]],
    ['a NUL byte in instructions', { instructions: `Seja breve${NUL}` }, [{ path: '/body/instructions', message: NUL_PATTERN }]],
    ['an id', { id: '01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f' }, [{ path: '/body/id', message: 'must NOT have additional properties' }]],
  ])('when the body has %s, then it answers 400 validation_error and the agent is unchanged', async (_label, body, details) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'PATCH', `/v1/agents/${ws.agentId}`, { apiKey: ws.apiKey, body });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(details));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it.each([
    ['broken JSON', '{"name": ', 'application/json', 400, INVALID_JSON],
    ['a text/plain body', '{"name": "Bia"}', 'text/plain', 415, NOT_JSON],
    ['a latin1 body', '{"name": "Bia"}', 'application/json; charset=latin1', 415, NOT_UTF8],
    ['a body over 1 MiB', JSON.stringify({ instructions: 'y'.repeat(1024 * 1024 + 1) }), 'application/json', 413, TOO_LARGE],
  ])('when it carries %s, then it answers the error and the agent is unchanged', async (_label, rawBody, contentType, status, body) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'PATCH', `/v1/agents/${ws.agentId}`, { apiKey: ws.apiKey, rawBody, headers: { 'content-type': contentType } });

    expect(response.status).toBe(status);
    expect(response.body).toEqual(body);
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('malformed ids in paths', () => {
  it.each([
    ['GET', '/v1/agents/123'],
    ['GET', '/v1/agents/not-a-uuid'],
    ['GET', '/v1/agents/%00'],
    ['GET', '/v1/agents/01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0'],
    ['GET', '/v1/agents/urn:uuid:01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f'],
    ['GET', '/v1/agents/{01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f}'],
    ['PATCH', '/v1/agents/123'],
    ['PATCH', '/v1/agents/not-a-uuid'],
    ['DELETE', '/v1/agents/123'],
    ['DELETE', '/v1/agents/not-a-uuid'],
    ['GET', '/v1/contacts/123'],
    ['GET', '/v1/contacts/not-a-uuid'],
  ])('when %s %s, then it answers 400 validation_error on /params/id and nothing changes', async (method, path) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, method, path, { apiKey: ws.apiKey, ...(method === 'PATCH' && { body: { name: 'Bia' } }) });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(UUID_DETAILS('/params/id')));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  // The router's decodeURIComponent throws a URIError on a broken percent-encoding: a 400, not a 500.
  it.each([
    ['GET', '/v1/agents/%E0%A4%A'],
    ['PATCH', '/v1/agents/%'],
    ['DELETE', '/v1/agents/%E0%A4%A'],
    ['GET', '/v1/contacts/%C0%AF'],
  ])('when %s %s has broken percent-encoding, then it answers 400 validation_error, not 500', async (method, path) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, method, path, { apiKey: ws.apiKey, ...(method === 'PATCH' && { body: { name: 'Bia' } }) });

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: { code: 'validation_error' } });
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('POST /contacts', () => {
  it.each([
    ['an unknown field', { ...buildContact(), cpf: '123' }, [{ path: '/body/cpf', message: 'must NOT have additional properties' }]],
    ['a number as phone', { name: 'Ana', phone: 5511987654321 }, [{ path: '/body/phone', message: 'must be string' }]],
    [
      'a phone without its +',
      { name: 'Ana', phone: '5511987654321' },
      [{ path: '/body/phone', message: 'must match pattern "^\\+[1-9]\\d{7,14}$", e.g. +5511987654321' }],
    ],
    ['null as email', { name: 'Ana', email: null }, [{ path: '/body/email', message: 'must be string' }]],
    ['a name of 201 characters', { name: 'c'.repeat(201) }, [{ path: '/body/name', message: 'must NOT have more than 200 characters' }]],
    ['a NUL byte in name', { name: `Ana${NUL}Souza` }, [{ path: '/body/name', message: NUL_PATTERN }]],
    ['a NUL byte in email', { name: 'Ana', email: `ana${NUL}@exemplo.com` }, [{ path: '/body/email', message: 'must match format "email"' }]],
    ['an object', { name: { first: 'Ana' } }, [{ path: '/body/name', message: 'must be string' }]],
  ])('when the body has %s, then it answers 400 validation_error and stores nothing', async (_label, body, details) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(details));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('POST /messages', () => {
  it('when the content has 4097 characters, then it answers 400 validation_error and stores no message or thread', async () => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/messages', {
      apiKey: ws.apiKey,
      body: { contactId: ws.contactId, channelId: ws.channels[1]!.id, content: 'm'.repeat(4097) },
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path: '/body/content', message: 'must NOT have more than 4096 characters' }]));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });

  it('when the content has exactly 4096 characters, then it is accepted (the limit is inclusive)', async () => {
    const ws = await arrange();

    const { data, response } = await ws.api.POST('/messages', { body: { contactId: ws.contactId, channelId: ws.channelId, content: 'm'.repeat(4096) } });

    expect(response.status).toBe(201);
    expect(data!.content).toHaveLength(4096);
    expect((await snapshot(ws.workspaceId)).counts).toEqual({ ...EXPECTED_COUNTS, messages: 2 });
  });

  it.each([
    [
      'a NUL byte in content',
      (ws: Arranged) => ({ contactId: ws.contactId, channelId: ws.channelId, content: `Olá${NUL}` }),
      [{ path: '/body/content', message: NUL_PATTERN }],
    ],
    [
      'an unknown field',
      (ws: Arranged) => ({ contactId: ws.contactId, channelId: ws.channelId, content: 'Olá', direction: 'inbound' }),
      [{ path: '/body/direction', message: 'must NOT have additional properties' }],
    ],
    ['a malformed contactId', (ws: Arranged) => ({ contactId: '123', channelId: ws.channelId, content: 'Olá' }), UUID_DETAILS('/body/contactId')],
    ['a malformed channelId', (ws: Arranged) => ({ contactId: ws.contactId, channelId: 'whatsapp', content: 'Olá' }), UUID_DETAILS('/body/channelId')],
    [
      'a number as content',
      (ws: Arranged) => ({ contactId: ws.contactId, channelId: ws.channelId, content: 42 }),
      [{ path: '/body/content', message: 'must be string' }],
    ],
  ])('when the body has %s, then it answers 400 validation_error and stores nothing', async (_label, build, details) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/messages', { apiKey: ws.apiKey, body: build(ws) });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(details));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('POST /threads', () => {
  it('when the agentId is malformed, then it answers 400 validation_error and opens no thread', async () => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'POST', '/v1/threads', {
      apiKey: ws.apiKey,
      body: { contactId: ws.contactId, channelId: ws.channels[1]!.id, agentId: 'not-a-uuid' },
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError(UUID_DETAILS('/body/agentId')));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe.each([
  ['GET /agents', '/v1/agents'],
  ['GET /contacts', '/v1/contacts'],
])('%s', (_name, path) => {
  it.each([
    ['page=0', '/query/page', 'must be >= 1'],
    ['page=-1', '/query/page', 'must be >= 1'],
    ['page=1000001', '/query/page', 'must be <= 1000000'],
    ['page=99999999999999999999', '/query/page', 'must be <= 1000000'],
    ['page=abc', '/query/page', 'must be integer'],
    ['page=1.5', '/query/page', 'must be integer'],
    ['limit=0', '/query/limit', 'must be >= 1'],
    ['limit=101', '/query/limit', 'must be <= 100'],
    ['limit=1.5', '/query/limit', 'must be integer'],
    ['limit=Infinity', '/query/limit', 'must be an integer from 1 to 100'],
    ['page=1e400', '/query/page', 'must be an integer from 1 to 1000000'],
    ['limit=1&limit=2', '/query/limit', 'must be integer'],
    ['page=1&page=2', '/query/page', 'must be integer'],
    ['unknown=1', '/query/unknown', "Unknown query parameter 'unknown'"],
  ])('when the query is %s, then it answers 400 validation_error naming the parameter', async (query, where, message) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'GET', `${path}?${query}`, { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path: where, message }]));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('GET /contacts filters', () => {
  it.each([
    ['q=%00', '/query/q', NUL_PATTERN],
    ['q=silva%00', '/query/q', NUL_PATTERN],
    ['q=', '/query/q', "Empty value found for query parameter 'q'"],
    ['q=a&q=b', '/query/q', 'must be string'],
    ['phone=5511987654321', '/query/phone', 'must match pattern "^\\+[1-9]\\d{7,14}$", e.g. +5511987654321'],
    ['email=not-an-email', '/query/email', 'must match format "email"'],
  ])('when the query is %s, then it answers 400 validation_error naming the parameter', async (query, where, message) => {
    const ws = await arrange();
    const before = await snapshot(ws.workspaceId);

    const response = await request(server, 'GET', `/v1/contacts?${query}`, { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path: where, message }]));
    expect(await snapshot(ws.workspaceId)).toEqual(before);
  });
});

describe('GET /agents filters', () => {
  it('when the status filter is unknown, then it answers 400 validation_error', async () => {
    const ws = await arrange();

    const response = await request(server, 'GET', '/v1/agents?status=deleted', { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path: '/query/status', message: 'must be equal to one of the allowed values: active, inactive' }]));
  });
});

describe('query strings with invalid percent-encoding', () => {
  it.each([
    ['a sequence cut short', '/v1/contacts?q=%E0%A4%A', '/query/q'],
    ['a % without two hex digits', '/v1/contacts?limit=10&q=50%', '/query/q'],
    ['bytes that are not UTF-8', '/v1/contacts?q=%FF%FE', '/query/q'],
    ['an encoded lone surrogate', '/v1/contacts?label=%ED%A0%80', '/query/label'],
    ['a parameter name', '/v1/contacts?%E0%A4=1', '/query/%E0%A4'],
  ])('when a query has %s, then it answers 400 validation_error naming the parameter', async (_case, url, path) => {
    const ws = await arrange();

    const response = await request(server, 'GET', url, { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path, message: 'has invalid percent-encoding' }]));
  });

  it.each([
    ['a % without two hex digits', '/v1/contacts/%ZZ', '/params/id'],
    ['bytes that are not UTF-8', '/v1/threads/%FF%FE/messages', '/params/threadId'],
  ])('when a path parameter has %s, then it answers 400 validation_error naming the parameter', async (_case, url, path) => {
    const ws = await arrange();

    const response = await request(server, 'GET', url, { apiKey: ws.apiKey });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError([{ path, message: 'has invalid percent-encoding' }]));
  });

  it('when the percent-encoding is valid (a multi-byte letter, a literal %25), then the query is read as before', async () => {
    const ws = await arrange();

    const response = await request(server, 'GET', '/v1/contacts?q=S%C3%A3o%2050%25', { apiKey: ws.apiKey });

    expect(response.status).toBe(200);
  });

  it('when the key is missing, then 401 comes first: an unauthenticated request learns nothing of its query', async () => {
    const response = await request(server, 'GET', '/v1/contacts?q=%E0%A4%A');

    expect(response.status).toBe(401);
  });
});
