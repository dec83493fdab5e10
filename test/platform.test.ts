// The pipeline's own answers (openapi.yaml's "Order of checks" and "Errors"): error codes and bodies, request ids, the service
// endpoints, and what the service says when its database is broken or unreachable.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { specYaml } from '../src/contract.js';
import { createDatabase } from '../src/db/database.js';
import { sql } from 'kysely';
import { buildAgent, buildContact, clientFor, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { fetchFromAnotherProcess, sleep } from './helpers/processes.js';
import { databaseUrl, emptyDatabase, startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let workspace: TestWorkspace;
beforeAll(async () => {
  server = await startServer();
  workspace = await createWorkspace(server);
});
afterAll(async () => {
  await server.close();
});

const error = (code: string, message: string) => ({ error: { code, message, requestId: expect.any(String) } });

describe('error codes', () => {
  it('when the path is unknown, then 404 not_found, before authentication', async () => {
    // Paths are exact, the version prefix too: /V1 is not /v1, and /v1/agents/ is not /v1/agents.
    for (const path of ['/v1/nope', '/v2/agents', '/agents', '/v1/agents/a/b', '/v1', '/V1/agents', '/v1/Agents', '/v1/agents/', '/v1/threads/stats/nps/']) {
      const response = await request(server, 'GET', path);
      expect(response.status, path).toBe(404);
      expect(response.body).toEqual(error('not_found', 'No such endpoint.'));
    }
  });

  it('when the method is not one of the path, then 405 method_not_allowed with Allow', async () => {
    const response = await request(server, 'DELETE', `/v1/threads/${randomUUID()}`, { apiKey: workspace.apiKey });

    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, PATCH');
    expect(response.body).toEqual(error('method_not_allowed', 'DELETE is not allowed on this path; use GET, PATCH.'));
  });

  it('when a GET path is asked with HEAD, then it answers as its GET without the body (RFC 9110), the checks included', async () => {
    const head = (path: string, key?: string) => fetch(`${server.baseUrl}${path}`, { method: 'HEAD', headers: key ? { authorization: `Bearer ${key}` } : {} });
    await workspace.api.POST('/contacts', { body: buildContact() });
    const get = await fetch(`${server.baseUrl}/v1/contacts`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    const asked = await head('/v1/contacts', workspace.apiKey);
    expect(asked.status).toBe(200);
    expect(asked.headers.get('content-type')).toBe(get.headers.get('content-type'));
    expect(asked.headers.get('content-length')).toBe(String(Buffer.byteLength(await get.text())));
    expect(await asked.text()).toBe('');
    expect((await head('/v1/contacts')).status).toBe(401);
    expect((await head('/v1/contacts?limit=0', workspace.apiKey)).status).toBe(400);
    const stream = await head('/v1/events/stream', workspace.apiKey);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  });

  it('when the body is not JSON, then 415 unsupported_media_type', async () => {
    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: workspace.apiKey,
      rawBody: 'name=Ana',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });

    expect(response.status).toBe(415);
    expect(response.body).toEqual(error('unsupported_media_type', 'Send the body as application/json.'));
  });

  it('when the JSON is broken, then 400 invalid_json', async () => {
    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: workspace.apiKey,
      rawBody: '{"name": "Ana",',
      headers: { 'content-type': 'application/json' },
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(error('invalid_json', 'The request body is not valid JSON.'));
  });

  it('when the body is over 1 MiB, then 413 payload_too_large', async () => {
    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: workspace.apiKey,
      body: buildAgent({ instructions: 'a'.repeat(1024 * 1024) }),
    });

    expect(response.status).toBe(413);
    expect(response.body).toEqual(error('payload_too_large', 'The request body is larger than 1 MiB.'));
  });

  it('when the Content-Length declares over 1 MiB, then 413 at once, before the body is read', async () => {
    // Declares 1 MiB + 1 and sends a few bytes: the answer cannot wait for the rest.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        `${server.baseUrl}/v1/agents`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json', 'content-length': String(1024 * 1024 + 1) },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => {
            resolve({ status: res.statusCode!, body });
            req.destroy();
          });
        },
      );
      req.on('error', reject);
      req.write('{"name": "');
    });

    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toEqual(error('payload_too_large', 'The request body is larger than 1 MiB.'));
  });

  it('when a client of its own process sends a body of 8 MiB whole, then it reads the 413 every time, not a reset', async () => {
    const headers = { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' };
    const outcomes = await fetchFromAnotherProcess(`${server.baseUrl}/v1/contacts`, {
      headers,
      prefix: '{"name": "',
      size: 8 * 2 ** 20,
      suffix: '"}',
      times: 6,
    });
    expect(outcomes).toEqual(Array.from({ length: 6 }, () => 413));
  });

  it('when the body breaks the contract, then 400 validation_error with a detail per problem', async () => {
    const response = await request(server, 'POST', '/v1/contacts', {
      apiKey: workspace.apiKey,
      body: { name: 'Mariana', phone: '11987654321', nickname: 'Mari' },
    });

    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('validation_error');
    expect(response.body.error.details).toEqual(
      expect.arrayContaining([
        { path: '/body/phone', message: expect.stringContaining('pattern') },
        { path: '/body/nickname', message: 'must NOT have additional properties' },
      ]),
    );
  });

  it('when the id is unknown, then 404 not_found', async () => {
    const response = await request(server, 'GET', `/v1/agents/${randomUUID()}`, { apiKey: workspace.apiKey });

    expect(response.status).toBe(404);
    expect(response.body).toEqual(error('not_found', 'Agent not found.'));
  });

  it('when a body reference is missing, then 422 invalid_reference naming the field', async () => {
    const response = await request(server, 'POST', '/v1/messages', {
      apiKey: workspace.apiKey,
      body: { contactId: randomUUID(), channelId: workspace.channels[0]!.id, content: 'Olá!' },
    });

    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      error: {
        code: 'invalid_reference',
        message: 'The contact does not exist.',
        details: [{ path: '/body/contactId', message: 'no contact with this id' }],
        requestId: expect.any(String),
      },
    });
  });

  it('when a unique value clashes, then 409 conflict', async () => {
    const contact = buildContact();
    await request(server, 'POST', '/v1/contacts', { apiKey: workspace.apiKey, body: contact });

    const response = await request(server, 'POST', '/v1/contacts', { apiKey: workspace.apiKey, body: contact });

    expect(response.status).toBe(409);
    expect(response.body.error.code).toBe('conflict');
  });
});

describe('X-Request-Id', () => {
  it('when the client sends none, then every response carries a fresh UUID', async () => {
    const ok = await request(server, 'GET', '/v1/agents', { apiKey: workspace.apiKey });
    const denied = await request(server, 'GET', '/v1/agents');
    const missing = await request(server, 'GET', '/nowhere');

    const ids = [ok, denied, missing].map((r) => r.headers.get('x-request-id'));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(3);
  });

  it('when the client sends one, then it is echoed, on errors too', async () => {
    const ok = await request(server, 'GET', '/v1/agents', { apiKey: workspace.apiKey, headers: { 'x-request-id': 'bot-42:run-7' } });
    const denied = await request(server, 'GET', '/v1/agents', { headers: { 'x-request-id': 'bot-42:run-8' } });

    expect(ok.headers.get('x-request-id')).toBe('bot-42:run-7');
    expect(denied.headers.get('x-request-id')).toBe('bot-42:run-8');
  });

  it('when the client sends an unusable one, then a fresh id replaces it', async () => {
    const response = await request(server, 'GET', '/healthz', { headers: { 'x-request-id': 'x'.repeat(129) } });

    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('response headers', () => {
  it('when any API or service endpoint answers, success or error, then it carries nosniff and no-store', async () => {
    const cases: Array<[string, string, string | undefined]> = [
      ['GET', '/v1/agents', workspace.apiKey],
      ['GET', '/v1/agents', undefined],
      ['GET', '/v1/nope', undefined],
      ['DELETE', '/v1/contacts', workspace.apiKey],
      ['GET', `/v1/agents/${randomUUID()}`, workspace.apiKey],
      ['GET', '/healthz', undefined],
      ['GET', '/readyz', undefined],
      ['GET', '/openapi.json', undefined],
    ];
    for (const [method, path, apiKey] of cases) {
      const response = await request(server, method, path, apiKey ? { apiKey } : {});
      expect([path, response.headers.get('x-content-type-options'), response.headers.get('cache-control')]).toEqual([path, 'nosniff', 'no-store']);
    }
  });

  it('when /docs is served, then the page is revalidated and its assets cached, not no-store', async () => {
    const page = await fetch(`${server.baseUrl}/docs`);
    const asset = await fetch(`${server.baseUrl}/docs/assets/swagger-ui.css`);

    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(asset.headers.get('cache-control')).toBe('public, max-age=3600');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('service endpoints', () => {
  it('when /healthz is asked, then the process answers ok without a key', async () => {
    const response = await request(server, 'GET', '/healthz');

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok' });
  });

  it('when the database is up, then /readyz answers 200', async () => {
    const response = await request(server, 'GET', '/readyz');

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ database: 'up' });
  });

  it('when the contract is asked for, then /openapi.json and /openapi.yaml serve openapi.yaml', async () => {
    const json = await request(server, 'GET', '/openapi.json');
    const yaml = await fetch(`${server.baseUrl}/openapi.yaml`);

    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json.body).toEqual(parse(specYaml));
    expect(await yaml.text()).toBe(specYaml);
  });

  it('when /docs reads its copy of the contract, then this server is the first one and the guide is set apart', async () => {
    const response = await request(server, 'GET', '/docs/openapi.json', { headers: { 'x-forwarded-proto': 'https' } });
    const contract = parse(specYaml);

    expect(response.status).toBe(200);
    expect(response.body.servers).toEqual([{ url: `${server.baseUrl}/v1`, description: expect.any(String) }, ...contract.servers]);
    expect(response.body.paths).toEqual(contract.paths);
    expect(response.body.info.description).not.toContain('## ');
    expect(contract.info.description).toContain(response.body['x-guide']);
    expect(response.body['x-guide']).toMatch(/^## Authentication and scopes/);
    // "Try it out" starts with an empty Idempotency-Key (an example there would be sent by every POST).
    const { example, ...idempotencyKey } = contract.components.parameters.IdempotencyKey;
    expect(example).toBeDefined();
    expect(response.body.components.parameters.IdempotencyKey).toEqual(idempotencyKey);
    expect({ ...response.body.components, parameters: { ...response.body.components.parameters, IdempotencyKey: undefined } }).toEqual({
      ...contract.components,
      parameters: { ...contract.components.parameters, IdempotencyKey: undefined },
    });
  });

  it('when /docs is asked for, then the reference page and its assets come from this server', async () => {
    const page = await fetch(`${server.baseUrl}/docs`);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]!);

    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(html).not.toMatch(/https?:\/\//);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) expect((await fetch(`${server.baseUrl}${asset}`)).status, asset).toBe(200);
  });
});

describe('when the database is broken', () => {
  it('when a query fails unexpectedly, then 500 internal_error without SQL or stack', async () => {
    // A real database with no tables: the key lookup fails with "relation does not exist".
    const empty = await emptyDatabase();
    const broken = await startServer({ db: empty, redisUrl: false });
    try {
      const response = await request(broken, 'GET', '/v1/agents', { apiKey: workspace.apiKey });

      expect(response.status).toBe(500);
      expect(response.body).toEqual(error('internal_error', 'Something went wrong on our side; quote the X-Request-Id when reporting it.'));
    } finally {
      await broken.close();
      await empty.destroy();
    }
  });

  it.skipIf(!databaseUrl)(
    'when a query waits past DATABASE_STATEMENT_TIMEOUT_MS (a row lock held elsewhere), then 503 and the change is not made',
    async () => {
      const impatient = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 2, statementTimeoutMs: 300 });
      const slow = await startServer({ db: impatient, redisUrl: false });
      const { data: agent } = await clientFor(slow, workspace.apiKey).POST('/agents', { body: buildAgent({ name: 'Ana' }) });
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const locked = new Promise<void>((lockedResolve) => {
        void server.db.transaction().execute(async (trx) => {
          await trx.selectFrom('agents').select('id').where('id', '=', agent!.id).forUpdate().execute();
          lockedResolve();
          await held;
        });
      });
      try {
        await locked;
        const started = Date.now();
        const response = await request(slow, 'PATCH', `/v1/agents/${agent!.id}`, { apiKey: workspace.apiKey, body: { name: 'Bia' } });

        expect(response.status).toBe(503);
        expect(response.headers.get('retry-after')).toBe('5');
        expect(response.body).toEqual(error('service_unavailable', 'The database took too long to answer; retry later.'));
        expect(Date.now() - started).toBeLessThan(2_000);
        release();
        const { data: after } = await clientFor(slow, workspace.apiKey).GET('/agents/{id}', { params: { path: { id: agent!.id } } });
        expect(after!.name).toBe('Ana');
      } finally {
        release();
        await slow.close();
        await impatient.destroy();
      }
    },
  );

  it.skipIf(!databaseUrl)('when every pooled connection is busy past DATABASE_POOL_WAIT_MS, then 503 instead of a wait', async () => {
    const small = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 1, poolWaitMs: 300 });
    const busy = await startServer({ db: small, redisUrl: false });
    const occupied = sql`select pg_sleep(2)`.execute(small);
    try {
      // Time for pg_sleep to take the one connection; if it has not, the request is served and this test fails.
      await sleep(100);
      const started = Date.now();
      const response = await request(busy, 'GET', '/v1/agents', { apiKey: workspace.apiKey });

      expect(response.status).toBe(503);
      expect(response.body).toEqual(error('service_unavailable', 'The service is temporarily unavailable; retry later.'));
      expect(Date.now() - started).toBeLessThan(1_500);
    } finally {
      await occupied;
      await busy.close();
      await small.destroy();
    }
  });

  it('when the database is unreachable, then /readyz and the API answer 503', async () => {
    const unreachable = createDatabase({ databaseUrl: 'postgres://root@127.0.0.1:1/none', pgliteDir: 'memory://' });
    const down = await startServer({ db: unreachable, redisUrl: false });
    try {
      const ready = await request(down, 'GET', '/readyz');
      const api = await request(down, 'GET', '/v1/agents', { apiKey: workspace.apiKey });

      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: 'unavailable', database: 'down', redis: 'not_configured' });
      expect(api.status).toBe(503);
      expect(api.body).toEqual(error('service_unavailable', 'The service is temporarily unavailable; retry later.'));
    } finally {
      await down.close();
      await unreachable.destroy();
    }
  });
});
