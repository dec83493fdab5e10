// Authentication and scopes (openapi.yaml's "Authentication and scopes"): who gets in, and what each key may do.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations, spec } from '../src/contract.js';
import { revokeApiKey } from '../src/db/api-keys.js';
import { SCOPES } from '../src/provisioning.js';
import { buildAgent, createWorkspace, request } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const UNAUTHORIZED = { error: { code: 'unauthorized', message: 'Missing or invalid API key.', requestId: expect.any(String) } };

describe('authentication', () => {
  it.each([
    ['no Authorization header', undefined],
    ['an empty header', ''],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['the scheme alone', 'Bearer'],
    ['a key without the sfk_ prefix', `Bearer ${'a'.repeat(40)}`],
    ['a key too short', 'Bearer sfk_abc123'],
    ['a key with characters outside base62', `Bearer sfk_${'a'.repeat(30)}-+/=`],
    ['two tokens', `Bearer sfk_${'a'.repeat(40)} sfk_${'b'.repeat(40)}`],
    ['an unknown well-formed key', `Bearer sfk_${'A1b2C3d4'.repeat(6)}`],
  ])('when the request carries %s, then it answers 401 unauthorized, with the bearer challenge', async (_case, header) => {
    const response = await request(server, 'GET', '/v1/agents', header === undefined ? {} : { headers: { authorization: header } });

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect(response.body).toEqual(UNAUTHORIZED);
  });

  it('when the key was revoked, then it answers 401 from then on', async () => {
    const { apiKey, keyId } = await createWorkspace(server);
    expect((await request(server, 'GET', '/v1/agents', { apiKey })).status).toBe(200);

    await revokeApiKey(server.db, keyId);
    const response = await request(server, 'GET', '/v1/agents', { apiKey });

    expect(response.status).toBe(401);
    expect(response.body).toEqual(UNAUTHORIZED);
  });

  it.each(['Bearer', 'bearer', 'BEARER', 'bEaReR'])('when the scheme is written %s, then the key is accepted', async (scheme) => {
    const { apiKey } = await createWorkspace(server);

    const response = await request(server, 'GET', '/v1/agents', { headers: { authorization: `${scheme} ${apiKey}` } });

    expect(response.status).toBe(200);
  });

  it('when an unauthenticated request is also invalid, then it only learns 401', async () => {
    const broken = await request(server, 'POST', '/v1/agents', { rawBody: '{"name":', headers: { 'content-type': 'application/json' } });
    const unknownId = await request(server, 'GET', `/v1/agents/${randomUUID()}`);
    const badId = await request(server, 'GET', '/v1/agents/not-a-uuid');

    for (const response of [broken, unknownId, badId]) expect(response.body).toEqual(UNAUTHORIZED);
  });
});

/** A request that reaches the scope check of an operation: any id, any body. */
function samplePath(path: string): string {
  return `/v1${path.replace(/\{\w+\}/g, randomUUID())}`;
}

const scoped = contractOperations.filter((op) => op.scopes.length > 0);

describe('scopes', () => {
  it.each(scoped.map((op) => [op.operationId, op] as const))('when the key lacks the scope of %s, then it answers 403 naming the scope', async (_id, op) => {
    const scope = op.scopes[0]!;
    const { apiKey } = await createWorkspace(server, { scopes: SCOPES.filter((s) => s !== scope) });

    const response = await request(server, op.method.toUpperCase(), samplePath(op.path), {
      apiKey,
      ...(op.hasBody && { body: {} }),
    });

    expect(response.status).toBe(403);
    expect(response.body).toEqual({ error: { code: 'forbidden', message: `This API key lacks the scope ${scope}.`, requestId: expect.any(String) } });
  });

  it('when a key holds only a write scope, then reading is still forbidden', async () => {
    const { apiKey } = await createWorkspace(server, { scopes: ['agents:write'] });

    const created = await request(server, 'POST', '/v1/agents', { apiKey, body: buildAgent() });
    const listed = await request(server, 'GET', '/v1/agents', { apiKey });

    expect(created.status).toBe(201);
    expect(listed.status).toBe(403);
  });

  it('when the key lacks the scope and the body is broken, then the scope answers first (403, not 400)', async () => {
    const { apiKey } = await createWorkspace(server, { scopes: ['agents:read'] });

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey,
      rawBody: '{"name":',
      headers: { 'content-type': 'application/json' },
    });

    expect(response.status).toBe(403);
    expect(response.body.error.code).toBe('forbidden');
  });
});

describe('the scopes as the contract documents them', () => {
  const described = (op: (typeof contractOperations)[number]): string => spec.paths[op.path][op.method].description;

  it('when the operations are read, then each needs at most one scope and its description names it', () => {
    for (const op of contractOperations) {
      expect(op.scopes.length, op.operationId).toBeLessThanOrEqual(1);
      const sentence = op.scopes[0] ? `Needs the \`${op.scopes[0]}\` scope.` : 'Needs no scope';
      expect(described(op), op.operationId).toContain(sentence);
    }
    expect(contractOperations.filter((op) => op.scopes.length === 0).map((op) => op.operationId)).toEqual(['getMe']);
  });

  it.each([
    ["the contract's guide", () => spec.info.description as string],
    ['README', () => /^ *\| scope \| operations \|\n(?: *\|.*\n)+/m.exec(fs.readFileSync(new URL('../README.md', import.meta.url), 'utf8'))![0]],
  ])('when the scope table of %s is read, then it lists every operation under the scope it needs', (_name, text) => {
    const rows = [...text().matchAll(/^ *\| (none: any valid key|`([\w:]+)`) \| (.+) \|$/gm)];
    const table = new Map(rows.map((row) => [row[2] ?? '', [...row[3]!.matchAll(/`(\w+) ([^`]+)`/g)].map((m) => `${m[1]} ${m[2]}`).sort()]));
    const expected = new Map<string, string[]>();
    for (const op of contractOperations) {
      const scope = op.scopes[0] ?? '';
      expected.set(scope, [...(expected.get(scope) ?? []), `${op.method.toUpperCase()} ${op.path}`].sort());
    }

    expect(Object.fromEntries(table)).toEqual(Object.fromEntries(expected));
  });

  it('when the Scope schema is read, then it lists exactly the scopes a key can be given', () => {
    expect(spec.components.schemas.Scope.enum).toEqual(SCOPES);
  });
});
