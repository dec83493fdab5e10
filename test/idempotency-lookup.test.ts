// An Idempotency-Key's lookup traveling with the handler's first statement (runIdempotent's
// `withFirstStatement`): no round trip of its own, and what the key says still decides the answer,
// whatever the handler's statements did, and the handler's changes are rolled back when the key is
// another request's.
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonText } from '../src/db/pagination.js';
import { contractOperations } from '../src/contract.js';
import { runIdempotent } from '../src/idempotency.js';
import { databaseOnlyOperations, keyFirstOperations } from '../src/routes/index.js';
import { storedPhone } from '../src/phones.js';
import { startCountingProxy } from '../bench/lib/pg-proxy.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { sleep } from './helpers/processes.js';
import { countRows, type CountedTable } from './helpers/rows.js';
import { databaseUrl, ownDatabase, startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const post = (ws: TestWorkspace, path: string, body: unknown, key?: string) =>
  request(server, 'POST', path, { apiKey: ws.apiKey, body, ...(key !== undefined && { headers: { 'idempotency-key': key } }) });

const count = (table: CountedTable, workspaceId: string): Promise<number> => countRows(server.db, table, workspaceId);

/** The backend of a request waiting on a lock in a statement whose text has `fragment`. */
async function waitingOn(watcher: pg.Client, fragment: string): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    // The activity view is read once per transaction unless cleared, and the watcher may be in one.
    await watcher.query('select pg_stat_clear_snapshot()');
    const { rows } = await watcher.query<{ pid: number }>(
      `select pid from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock' and query ilike $1`,
      [`%${fragment}%`],
    );
    if (rows[0]) return rows[0].pid;
    await sleep(25);
  }
  throw new Error(`no request waited in ${fragment}`);
}

describe('which POSTs look their key up with their first statement', () => {
  it('when the contract has a POST, then it is either database-only or kept apart with its reason, not both', () => {
    const posts = contractOperations.filter((op) => op.method === 'post').map((op) => op.operationId);

    const unclassified = posts.filter((id) => databaseOnlyOperations.has(id) === (keyFirstOperations[id] !== undefined));

    expect(unclassified).toEqual([]);
    expect([...databaseOnlyOperations, ...Object.keys(keyFirstOperations)].filter((id) => !posts.includes(id as never))).toEqual([]);
  });
});

describe.skipIf(!databaseUrl)('Idempotency-Key looked up with the first statement (needs DATABASE_URL)', () => {
  it('when the key comes back while its first request still runs, then 409 at once, without running the handler, and one record is made', async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const body = buildContact();
    // Another transaction inserting a contact with the same phone, not committed: the first
    // request's insert waits on it, holding the key and the phone's lock meanwhile.
    const holder = new pg.Client({ connectionString: databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query(`insert into contacts (workspace_id, id, name, phone, created_at, updated_at) values ($1, $2, 'Outro', $3, now(), now())`, [
        ws.workspaceId,
        randomUUID(),
        storedPhone(body.phone!),
      ]);
      const first = post(ws, '/v1/contacts', body, key);
      await waitingOn(holder, 'insert into "contacts"');

      // Had its handler run, its first statement (the phone's lock) would wait for the first request.
      const second = await post(ws, '/v1/contacts', body, key);
      await holder.query('rollback');
      const created = await first;

      expect(second.status).toBe(409);
      expect(second.body.error.code).toBe('idempotency_key_in_progress');
      expect(created.status).toBe(201);
      expect([await count('contacts', ws.workspaceId), await count('idempotency_keys', ws.workspaceId)]).toEqual([1, 1]);
      const retried = await post(ws, '/v1/contacts', body, key);
      expect([retried.status, retried.body.id, retried.headers.get('idempotent-replayed')]).toEqual([201, created.body.id, 'true']);
    } finally {
      await holder.end();
    }
  });

  it("when the retry's first statement fails on what the first request made (a unique violation), then the stored reply is answered, not the error", async () => {
    const ws = await createWorkspace(server);
    const key = randomUUID();
    const meta = {
      externalId: String(Date.now()) + String(Math.floor(Math.random() * 1e6)),
      accessToken: 'EAAteste',
      appSecret: randomBytes(16).toString('hex'),
      verifyToken: 'v',
    };
    const body = { type: 'whatsapp', name: 'Loja', provider: 'meta', meta };
    const channelsBefore = await count('channels', ws.workspaceId);

    const first = await post(ws, '/v1/channels', body, key);
    const again = await post(ws, '/v1/channels', body, key);
    // The same insert without the key: the handler's answer to it, which the key's retry must not give.
    const withoutKey = await post(ws, '/v1/channels', body);

    expect(first.status).toBe(201);
    expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(again.body).toEqual(first.body);
    expect([withoutKey.status, withoutKey.body.error.code]).toEqual([409, 'conflict']);
    expect(await count('channels', ws.workspaceId)).toBe(channelsBefore + 1);
    expect(await count('idempotency_keys', ws.workspaceId)).toBe(1);
  });

  it('when the handler runs no statement, then the lookup is answered before its reply is stored, and a retry replays it', async () => {
    const ws = await createWorkspace(server);
    const scope = { workspaceId: ws.workspaceId, apiKeyId: ws.keyId, key: randomUUID() };
    const call = { method: 'POST', path: '/v1/nothing', body: { n: 1 } };
    let runs = 0;
    const handle = () => Promise.resolve({ status: 200, body: { run: ++runs } });

    const first = await runIdempotent(server.db, scope, call, handle, undefined, { withFirstStatement: true });
    const again = await runIdempotent(server.db, scope, call, handle, undefined, { withFirstStatement: true });

    expect(first).toEqual({ reply: { status: 200, body: { run: 1 } }, replayed: false });
    expect(again).toEqual({ reply: { status: 200, body: new JsonText('{"run":1}') }, replayed: true });
    // The handler ran again before the lookup was answered (what withFirstStatement allows): its reply was not the answer.
    expect(runs).toBe(2);
    expect(await count('idempotency_keys', ws.workspaceId)).toBe(1);
  });

  it('when POST /v1/contacts is sent with a fresh key, then it takes as many round trips to PostgreSQL as without one', async () => {
    const proxy = await startCountingProxy(new URL(databaseUrl!));
    const own = await ownDatabase();
    const counted = await startServer({ databaseUrl: proxy.via(own.url), redisUrl: false });
    try {
      const ws = await createWorkspace(counted);
      const roundTrips = async (headers: Record<string, string>) => {
        const before = proxy.turns();
        const res = await request(counted, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body: { name: 'Cliente' }, headers });
        expect(res.status).toBe(201);
        return proxy.turns() - before;
      };
      // Warm: the API key cached, the statements prepared on the connection.
      for (let i = 0; i < 3; i++) await roundTrips({ 'idempotency-key': randomUUID() });

      const keyless = await roundTrips({});
      const keyed = await roundTrips({ 'idempotency-key': randomUUID() });

      expect(keyed).toBe(keyless);
    } finally {
      await counted.close();
      await own.drop();
      proxy.close();
    }
  });
});
