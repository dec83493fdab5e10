// Idempotency-Key on every POST: a retry replays the first result and changes nothing; another
// path or body under the key is a 422, a request while the first runs a 409; the stored result
// commits with the change or not at all; keys belong to one API key and last 24 hours.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations, spec } from '../src/contract.js';
import { createDatabase } from '../src/db/database.js';
import { purgeExpiredResults } from '../src/db/idempotency.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { buildAgent, buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { sleep } from './helpers/processes.js';
import { countRows } from './helpers/rows.js';
import { refunds, stageId } from './helpers/automations.js';
import { databaseUrl, startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const post = (ws: TestWorkspace, path: string, body: unknown, key?: string, apiKey = ws.apiKey) =>
  request(server, 'POST', path, { apiKey, body, ...(key !== undefined && { headers: { 'idempotency-key': key } }) });

const count = (table: 'agents' | 'contacts' | 'threads' | 'messages', workspaceId: string): Promise<number> => countRows(server.db, table, workspaceId);

const storedKeys = (workspaceId: string): Promise<number> => countRows(server.db, 'idempotency_keys', workspaceId);

/** Results stored under this key string, by any API key of any workspace. */
const storedUnder = async (key: string): Promise<number> =>
  (
    await server.db
      .selectFrom('idempotency_keys')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('key', '=', key)
      .executeTakeFirstOrThrow()
  ).n;

/**
 * A transaction of the test's own, on a connection outside the service's pool, that has inserted a
 * row under the key and not committed: a request's lookup does not see it, and its store waits on
 * it (the primary key) until the test rolls it back.
 */
async function holdKeyRow(ws: TestWorkspace, key: string): Promise<pg.Client> {
  const holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
  await holder.query('begin');
  await holder.query(
    `insert into idempotency_keys (workspace_id, api_key_id, key, method, path, body_sha256, status, response)
     values ($1, $2, $3, 'POST', '/v1/contacts', '', 201, '')`,
    [ws.workspaceId, ws.keyId, key],
  );
  return holder;
}

/** The backend of the request whose store waits on the held row (the one request of this test storing a key). */
async function blockedStore(holder: pg.Client): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    // The activity view is read once per transaction unless cleared, and the holder is in one.
    await holder.query('select pg_stat_clear_snapshot()');
    const { rows } = await holder.query<{ pid: number }>(
      `select pid from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'
          and query ilike '%insert into idempotency_keys%'`,
    );
    if (rows[0]) return rows[0].pid;
    await sleep(25);
  }
  throw new Error('no request waited to store its result');
}

describe('POST with Idempotency-Key', () => {
  it('when the same request is sent again with the key, then the first result is replayed and nothing new is stored', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const body = buildContact();

    const first = await post(ws, '/v1/contacts', body, key);
    const again = await post(ws, '/v1/contacts', { ...body }, key);

    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(await count('contacts', ws.workspaceId)).toBe(1);
  });

  it('when the body has its keys in another order, then it is the same body and replays', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const { name, instructions, model } = buildAgent();

    const first = await post(ws, '/v1/agents', { name, instructions, model }, key);
    const again = await post(ws, '/v1/agents', { model, instructions, name }, key);

    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await count('agents', ws.workspaceId)).toBe(1);
  });

  it('when every POST of the API is retried with its key, then each replays its first answer', async () => {
    const ws = await createWorkspace(server);
    const channelId = ws.channels[0]!.id;
    const { body: contact } = await post(ws, '/v1/contacts', buildContact());
    const { body: other } = await post(ws, '/v1/contacts', buildContact());
    const { body: message } = await post(ws, '/v1/messages', { contactId: other.id, channelId, content: 'Olá' });
    const calls: Array<[string, unknown]> = [
      ['/v1/agents', buildAgent()],
      ['/v1/contacts', buildContact()],
      ['/v1/messages', { contactId: contact.id, channelId, content: 'Seu pedido saiu para entrega.' }],
      ['/v1/threads', { contactId: contact.id, channelId: ws.channels[1]!.id }],
      [`/v1/threads/${message.threadId}/nps`, { score: 9 }],
      // Handlers that open a transaction of their own: under the key it is the key's.
      ['/v1/stages', { name: 'Pós-venda' }],
      ['/v1/automations', refunds(await stageId(ws, 'Novo'))],
      ['/v1/sla-policies', { name: 'Primeira resposta em 15 minutos', targets: { firstResponseMinutes: 15 } }],
    ];
    const before = await Promise.all((['agents', 'contacts', 'threads', 'messages'] as const).map((t) => count(t, ws.workspaceId)));

    for (const [path, body] of calls) {
      const key = randomUUID();
      const first = await post(ws, path, body, key);
      const again = await post(ws, path, body, key);
      expect([path, first.status]).toEqual([path, 201]);
      expect([path, again.status, again.headers.get('idempotent-replayed')]).toEqual([path, 201, 'true']);
      expect(again.body).toEqual(first.body);
    }

    const after = await Promise.all((['agents', 'contacts', 'threads', 'messages'] as const).map((t) => count(t, ws.workspaceId)));
    // The message opens the contact's thread on the first channel, POST /threads another on the second.
    expect(after).toEqual([before[0]! + 1, before[1]! + 1, before[2]! + 2, before[3]! + 1]);
    expect(await storedKeys(ws.workspaceId)).toBe(calls.length);
  });

  it('when the contract is read, then every POST of the API takes Idempotency-Key and declares its replays and its 409 and 422', () => {
    const posts = contractOperations.filter((op) => op.method === 'post');
    const missing = posts.flatMap((op) => {
      const item = spec.paths[op.path] as { parameters?: Array<{ $ref?: string }>; post: Record<string, any> };
      const parameters = [...(item.parameters ?? []), ...((item.post.parameters as Array<{ $ref?: string }> | undefined) ?? [])];
      const responses = item.post.responses as Record<string, { headers?: Record<string, unknown> }>;
      const successes = Object.entries(responses).filter(([status]) => status.startsWith('2'));
      return [
        ...(parameters.some((p) => p.$ref === '#/components/parameters/IdempotencyKey') ? [] : [`${op.path}: no IdempotencyKey parameter`]),
        ...successes.filter(([, answer]) => !answer.headers?.['Idempotent-Replayed']).map(([status]) => `${op.path}: ${status} without Idempotent-Replayed`),
        ...(['409', '422'] as const).filter((status) => !responses[status]).map((status) => `${op.path}: no ${status}`),
      ];
    });

    expect(posts.length).toBeGreaterThan(15);
    expect(missing).toEqual([]);
  });

  it('when an upsert and a merge are retried with their keys, then each replays its first answer and changes nothing', async () => {
    const ws = await createWorkspace(server);
    const target = (await post(ws, '/v1/contacts', buildContact())).body as { id: string };
    const source = (await post(ws, '/v1/contacts', buildContact())).body as { id: string };
    const [upsertKey, mergeKey] = [randomUUID(), randomUUID()];
    const upsert = { externalId: `crm-${randomUUID()}`, name: 'Ana Souza' };

    const created = await post(ws, '/v1/contacts/upsert', upsert, upsertKey);
    const createdAgain = await post(ws, '/v1/contacts/upsert', upsert, upsertKey);
    const reused = await post(ws, '/v1/contacts/upsert', { ...upsert, name: 'Ana S.' }, upsertKey);
    const merged = await post(ws, `/v1/contacts/${target.id}/merge`, { sourceIds: [source.id] }, mergeKey);
    const mergedAgain = await post(ws, `/v1/contacts/${target.id}/merge`, { sourceIds: [source.id] }, mergeKey);

    expect([created.status, createdAgain.status, createdAgain.headers.get('idempotent-replayed')]).toEqual([201, 201, 'true']);
    expect(createdAgain.body).toEqual(created.body);
    expect([reused.status, reused.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    expect([merged.status, mergedAgain.status, mergedAgain.headers.get('idempotent-replayed')]).toEqual([200, 200, 'true']);
    expect(mergedAgain.body).toEqual(merged.body);
    // The target, the upserted contact; the source merged away. The upsert kept its first name.
    const { body: names } = await request(server, 'GET', '/v1/contacts?limit=100', { apiKey: ws.apiKey });
    expect((names.data as Array<{ id: string; name: string }>).map((c) => c.id).sort()).toEqual([target.id, created.body.id].sort());
    expect((names.data as Array<{ id: string; name: string }>).find((c) => c.id === created.body.id)!.name).toBe('Ana Souza');
  });

  it('when the key comes back with another body, then 422 idempotency_key_reused and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const first = await post(ws, '/v1/contacts', buildContact({ name: 'Ana' }), key);

    const reused = await post(ws, '/v1/contacts', buildContact({ name: 'Bia' }), key);

    expect(first.status).toBe(201);
    expect(reused.status).toBe(422);
    expect(reused.body).toEqual({
      error: {
        code: 'idempotency_key_reused',
        message: 'This Idempotency-Key was used with another path or body within 24 hours.',
        details: [{ path: '/headers/idempotency-key', message: 'was first used for POST /v1/contacts with another body' }],
        requestId: reused.headers.get('x-request-id'),
      },
    });
    expect(await count('contacts', ws.workspaceId)).toBe(1);
  });

  it('when the key comes back on another path, then 422 idempotency_key_reused', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    await post(ws, '/v1/agents', buildAgent(), key);

    const reused = await post(ws, '/v1/contacts', buildContact(), key);

    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
    expect(await count('contacts', ws.workspaceId)).toBe(0);
  });

  it('when ten requests with one key arrive at once, then one record is made and every other answer is its replay or 409 in progress', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const body = buildContact();

    const answers = await Promise.all(Array.from({ length: 10 }, () => post(ws, '/v1/contacts', body, key)));

    const created = answers.filter((a) => a.status === 201);
    const busy = answers.filter((a) => a.status === 409);
    expect(created.length + busy.length).toBe(10);
    expect(new Set(created.map((a) => a.body.id)).size).toBe(1);
    expect(created.filter((a) => a.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    for (const a of busy) {
      expect(a.body).toEqual({
        error: {
          code: 'idempotency_key_in_progress',
          message: 'A request with this Idempotency-Key is still running; retry shortly.',
          requestId: a.headers.get('x-request-id'),
        },
      });
    }
    expect(await count('contacts', ws.workspaceId)).toBe(1);
    const retried = await post(ws, '/v1/contacts', body, key);
    expect([retried.status, retried.body.id, retried.headers.get('idempotent-replayed')]).toEqual([201, created[0]!.body.id, 'true']);
  });

  it('when another API key of the workspace sends the same key, then it is a request of its own', async () => {
    const ws = await createWorkspace(server);
    const second = await provision(server.db, { plan: 'enterprise', scopes: [...SCOPES], workspaceId: ws.workspaceId });
    const key = randomUUID();

    const mine = await post(ws, '/v1/agents', buildAgent(), key);
    const theirs = await post(ws, '/v1/agents', buildAgent(), key, second.apiKey);

    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.id).not.toBe(mine.body.id);
    expect(await count('agents', ws.workspaceId)).toBe(2);
  });

  it('when the request fails on a database error after its change, then neither the change nor the key is stored, and the retry makes one record', async () => {
    const ws = await createWorkspace(server);
    const key = `fail-once-${randomUUID()}`;
    const sequence = `sf_test_fail_${randomUUID().replace(/-/g, '')}`;
    // The database fails the key's first store, after the contact was inserted in the same transaction.
    await sql.raw(`create sequence ${sequence}`).execute(server.db);
    await sql
      .raw(
        `create or replace function ${sequence}() returns trigger language plpgsql as $$
         begin
           if new.key = '${key}' and nextval('${sequence}') = 1 then
             raise exception 'simulated connection failure' using errcode = '08006';
           end if;
           return new;
         end $$`,
      )
      .execute(server.db);
    await sql.raw(`create trigger ${sequence} before insert on idempotency_keys for each row execute function ${sequence}()`).execute(server.db);
    const body = buildContact();
    try {
      const failed = await post(ws, '/v1/contacts', body, key);
      const contactsAfterFailure = await count('contacts', ws.workspaceId);
      const keysAfterFailure = await storedKeys(ws.workspaceId);
      const retried = await post(ws, '/v1/contacts', body, key);

      expect(failed.status).toBe(503);
      expect(failed.body.error.code).toBe('service_unavailable');
      expect([contactsAfterFailure, keysAfterFailure]).toEqual([0, 0]);
      expect(retried.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(await count('contacts', ws.workspaceId)).toBe(1);
    } finally {
      await sql.raw(`drop trigger ${sequence} on idempotency_keys`).execute(server.db);
      await sql.raw(`drop function ${sequence}()`).execute(server.db);
      await sql.raw(`drop sequence ${sequence}`).execute(server.db);
    }
  });

  it('when the request is refused (409 conflict), then nothing is stored and the same retry runs again', async () => {
    const ws = await createWorkspace(server);
    const phone = buildContact().phone;
    await post(ws, '/v1/contacts', buildContact({ phone }));
    const key = randomUUID();

    const first = await post(ws, '/v1/contacts', buildContact({ phone }), key);
    const again = await post(ws, '/v1/contacts', buildContact({ phone }), key);

    expect([first.status, again.status]).toEqual([409, 409]);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await storedKeys(ws.workspaceId)).toBe(0);
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a space', 'my key'],
    ['non-ASCII', 'chave-ção'],
  ])('when the key is %s, then 400 validation_error on the header and nothing is stored', async (_label, key) => {
    const ws = await createWorkspace(server);

    const response = await request(server, 'POST', '/v1/agents', {
      apiKey: ws.apiKey,
      body: buildAgent(),
      headers: { 'idempotency-key': key },
    });

    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('validation_error');
    expect(response.body.error.details[0].path).toBe('/headers/idempotency-key');
    expect(await count('agents', ws.workspaceId)).toBe(0);
  });

  it('when a stored result is older than 24 hours, then the key is new again, and the purge deletes such results', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const body = buildAgent();
    const first = await post(ws, '/v1/agents', body, key);
    await sql`update idempotency_keys set created_at = now() - interval '24 hours 1 second' where workspace_id = ${ws.workspaceId}`.execute(server.db);

    const later = await post(ws, '/v1/agents', body, key);
    await sql`update idempotency_keys set created_at = now() - interval '25 hours' where workspace_id = ${ws.workspaceId}`.execute(server.db);
    const purged = await purgeExpiredResults(server.db);

    expect(later.status).toBe(201);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(later.body.id).not.toBe(first.body.id);
    expect(purged).toBeGreaterThanOrEqual(1);
    expect(await storedKeys(ws.workspaceId)).toBe(0);
  });

  // Database errors that really happen, not raised by the test: the connection cut under the
  // request (as a restart or failover does) and a statement timeout while waiting on a lock.
  it.skipIf(!databaseUrl)(
    'when the connection is cut while the result is stored, then neither the change nor the key is stored, and the retry makes one record',
    async () => {
      const ws = await createWorkspace(server);
      const key = randomUUID();
      const body = buildContact();
      const holder = await holdKeyRow(ws, key);
      try {
        const pending = post(ws, '/v1/contacts', body, key);
        const pid = await blockedStore(holder);
        // The contact is inserted in the request's transaction, which now waits to store the key.
        await holder.query('select pg_terminate_backend($1)', [pid]);
        const failed = await pending;
        await holder.query('rollback');

        expect(failed.status).toBe(503);
        expect(failed.body.error.code).toBe('service_unavailable');
        expect([await count('contacts', ws.workspaceId), await storedKeys(ws.workspaceId)]).toEqual([0, 0]);

        const retried = await post(ws, '/v1/contacts', body, key);
        const again = await post(ws, '/v1/contacts', body, key);

        expect(retried.status).toBe(201);
        expect(retried.headers.get('idempotent-replayed')).toBeNull();
        expect([again.status, again.body.id, again.headers.get('idempotent-replayed')]).toEqual([201, retried.body.id, 'true']);
        expect([await count('contacts', ws.workspaceId), await storedKeys(ws.workspaceId)]).toEqual([1, 1]);
      } finally {
        await holder.end();
      }
    },
  );

  it.skipIf(!databaseUrl)(
    "when a request with the key finishes between this one's look and its store, then this one's change is rolled back and it answers as the stored result says",
    async () => {
      const ws = await createWorkspace(server);
      const key = randomUUID();
      // The other request: its result is not committed when this one looks, and is when it stores.
      const holder = await holdKeyRow(ws, key);
      try {
        const pending = post(ws, '/v1/contacts', buildContact(), key);
        await blockedStore(holder);
        await holder.query('commit');
        const answer = await pending;

        // The stored result is the other request's (another body): this one is a reuse of the key.
        expect(answer.status).toBe(422);
        expect(answer.body.error.code).toBe('idempotency_key_reused');
        expect([await count('contacts', ws.workspaceId), await storedKeys(ws.workspaceId)]).toEqual([0, 1]);
      } finally {
        await holder.end();
      }
    },
  );

  it.skipIf(!databaseUrl)(
    'when storing the result runs past the statement timeout, then 503 and nothing is stored, and the retry makes one record',
    async () => {
      const db = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 2, statementTimeoutMs: 300 });
      const impatient = await startServer({ db });
      const ws = await createWorkspace(impatient);
      const key = randomUUID();
      const body = buildContact();
      const send = () => request(impatient, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body, headers: { 'idempotency-key': key } });
      const holder = await holdKeyRow(ws, key);
      try {
        const failed = await send();
        await holder.query('rollback');

        expect(failed.status).toBe(503);
        expect(failed.body.error.code).toBe('service_unavailable');
        expect(failed.body.error.message).toBe('The database took too long to answer; retry later.');
        expect([await count('contacts', ws.workspaceId), await storedKeys(ws.workspaceId)]).toEqual([0, 0]);

        const retried = await send();

        expect(retried.status).toBe(201);
        expect(retried.headers.get('idempotent-replayed')).toBeNull();
        expect([await count('contacts', ws.workspaceId), await storedKeys(ws.workspaceId)]).toEqual([1, 1]);
      } finally {
        await holder.end();
        await impatient.close();
        await db.destroy();
      }
    },
  );
});

describe('POST with Idempotency-Key refused before its handler', () => {
  it('when the API key is unknown, then 401 and nothing is stored under the key', async () => {
    const key = randomUUID();

    const refused = await request(server, 'POST', '/v1/contacts', {
      apiKey: `sfk_${'0'.repeat(40)}`,
      body: buildContact(),
      headers: { 'idempotency-key': key },
    });

    expect(refused.status).toBe(401);
    expect(await storedUnder(key)).toBe(0);
  });

  it('when the API key lacks the scope, then 403 and nothing is stored under the key', async () => {
    const ws = await createWorkspace(server, { scopes: ['contacts:read'] });
    const key = randomUUID();

    const refused = await post(ws, '/v1/contacts', buildContact(), key);

    expect(refused.status).toBe(403);
    expect(await storedUnder(key)).toBe(0);
    expect(await count('contacts', ws.workspaceId)).toBe(0);
  });

  it('when the body breaks the contract, then 400 and nothing is stored, so the key then serves a valid body', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();

    const refused = await post(ws, '/v1/contacts', { email: 'sem.nome@exemplo.com.br' }, key);
    const valid = await post(ws, '/v1/contacts', buildContact(), key);

    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('validation_error');
    expect(valid.status).toBe(201);
    expect(valid.headers.get('idempotent-replayed')).toBeNull();
    expect(await storedKeys(ws.workspaceId)).toBe(1);
  });

  it('when the key is over its rate limit, then 429 and nothing is stored under the key', async () => {
    const ws = await createWorkspace(server, { plan: 'free' });
    const key = randomUUID();
    for (let i = 0; i < 60; i++) expect((await request(server, 'GET', '/v1/contacts', { apiKey: ws.apiKey })).status).toBe(200);

    const refused = await post(ws, '/v1/contacts', buildContact(), key);

    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('rate_limited');
    expect(await storedUnder(key)).toBe(0);
    expect(await count('contacts', ws.workspaceId)).toBe(0);
  });
});
