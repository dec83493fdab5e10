// Wide JSON: a body holding an array or object with more members than any of the contract's (its
// largest maxItems, maxProperties or declared properties: maxBodyMembers) is refused before the
// contract's check walks it member by member: a 400 naming where, nothing stored, and the event
// loop free meanwhile (50,000 attributes with object values held it for 0.4-1 s before).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations, maxBodyMembers, spec } from '../src/contract.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { longestHealthWait } from './helpers/automations.js';
import { databaseUrl, startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let ws: TestWorkspace;

beforeAll(async () => {
  server = await startServer();
  ws = await createWorkspace(server);
});
afterAll(async () => {
  await server?.close();
});

const wide = (path: string, kind: 'items' | 'properties') => ({
  error: {
    code: 'validation_error',
    message: 'The request does not match the contract.',
    requestId: expect.any(String),
    details: [{ path, message: `must NOT have more than ${maxBodyMembers} ${kind} (no array or object of this API's bodies holds more)` }],
  },
});

/** `n` attributes whose values are objects (each a wrong type as well). */
const attributes = (n: number): Record<string, unknown> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, { a: 1 }]));

async function contactCount(): Promise<number> {
  const { data } = await ws.api.GET('/contacts', { params: { query: { limit: 1 } } });
  return data!.pagination.total;
}

describe('an array or object wider than the contract takes', () => {
  it('when the contract is read, then its widest body member is 100 (the attributes of PATCH /contacts/{id}, and a condition value list)', () => {
    expect(maxBodyMembers).toBe(100);
  });

  it("when the contract's request bodies are read, then every array in them has maxItems and every open object maxProperties (so the bound is every body's)", () => {
    const unbounded: string[] = [];
    const seen = new Set<unknown>();
    const walk = (node: unknown, at: string): void => {
      if (typeof node !== 'object' || node === null || seen.has(node)) return;
      seen.add(node);
      const schema = node as Record<string, any>;
      if (typeof schema.$ref === 'string') return walk(spec.components.schemas[schema.$ref.split('/').pop()!], schema.$ref);
      const types = [schema.type].flat();
      if (types.includes('array') && schema.maxItems === undefined) unbounded.push(`${at}: an array without maxItems`);
      const open = schema.additionalProperties !== undefined && schema.additionalProperties !== false;
      if (types.includes('object') && open && schema.maxProperties === undefined) unbounded.push(`${at}: an open object without maxProperties`);
      for (const [key, value] of Object.entries(schema)) if (!['example', 'examples', 'default', 'const', 'enum'].includes(key)) walk(value, `${at}/${key}`);
    };
    for (const op of contractOperations) walk(spec.paths[op.path][op.method].requestBody?.content?.['application/json'], op.operationId);
    expect(unbounded).toEqual([]);
  });

  it('when a contact is created, changed or upserted with 50,000 attributes, then each is a 400 naming /body/attributes, and nothing is stored', async () => {
    const before = await contactCount();
    const body = { ...buildContact(), attributes: attributes(50_000) };
    const created = await request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body });
    expect(created.status).toBe(400);
    expect(created.body).toEqual(wide('/body/attributes', 'properties'));
    const upserted = await request(server, 'POST', '/v1/contacts/upsert', { apiKey: ws.apiKey, body });
    expect(upserted.body).toEqual(wide('/body/attributes', 'properties'));
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const changed = await request(server, 'PATCH', `/v1/contacts/${contact!.id}`, { apiKey: ws.apiKey, body: { attributes: attributes(50_000) } });
    expect(changed.body).toEqual(wide('/body/attributes', 'properties'));
    expect(await contactCount()).toBe(before + 1);
    const { data: again } = await ws.api.GET('/contacts/{id}', { params: { path: { id: contact!.id } } });
    expect(again!.attributes).toEqual({});
  });

  it("when a merge names 120,000 sources, then it is a 400 naming /body/sourceIds; 101 of them are the same 400, and 100 get the contract's own answer", async () => {
    const { data: target } = await ws.api.POST('/contacts', { body: buildContact() });
    const merge = (n: number) =>
      request(server, 'POST', `/v1/contacts/${target!.id}/merge`, { apiKey: ws.apiKey, body: { sourceIds: Array.from({ length: n }, () => ({})) } });
    expect((await merge(120_000)).body).toEqual(wide('/body/sourceIds', 'items'));
    expect((await merge(maxBodyMembers + 1)).body).toEqual(wide('/body/sourceIds', 'items'));
    const atTheBound = await merge(maxBodyMembers);
    expect(atTheBound.status).toBe(400);
    expect((atTheBound.body as { error: { details: Array<{ path: string; message: string }> } }).error.details[0]).toEqual({
      path: '/body/sourceIds',
      message: 'must NOT have more than 50 items',
    });
  });

  it('when an object deep in a body is too wide, then the 400 names it, its keys escaped as JSON pointers', async () => {
    const res = await request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body: { ...buildContact(), attributes: { 'a/b': attributes(101) } } });
    expect(res.body).toEqual(wide('/body/attributes/a~1b', 'properties'));
  });

  // PGlite (the embedded default) runs each query on the process's own event loop: the bound is the server's, on PostgreSQL.
  it.skipIf(!databaseUrl)('when 50,000 attributes with object values are refused, then /healthz answers within 250 ms throughout', async () => {
    const body = JSON.stringify({ ...buildContact(), attributes: attributes(50_000) });
    // Warm: the route's validator compiled, the parser's buffers grown.
    await request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, rawBody: body, headers: { 'content-type': 'application/json' } });
    for (let round = 0; round < 3; round++) {
      const refused = request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, rawBody: body, headers: { 'content-type': 'application/json' } });
      expect(await longestHealthWait(server.baseUrl, refused)).toBeLessThan(250);
      expect((await refused).status).toBe(400);
    }
  });
});
