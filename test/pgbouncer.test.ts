// The service behind PgBouncer in transaction pooling mode (Debian's 1.18, which passes no named
// prepared statement from one server connection to the next): with DATABASE_PREPARED_STATEMENTS=false
// the core paths work through it (contacts, an Idempotency-Key and its replay, a message sent through
// Graph and its status, a thread change, an event delivered to a webhook endpoint), and with named
// statements the same query fails once it lands on another server connection.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../src/db/database.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel } from './helpers/channels.js';
import { GraphDouble } from './helpers/graph.js';
import { PgBouncer, pgbouncerBinary } from './helpers/pgbouncer.js';
import { waitFor } from './helpers/processes.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

const binary = pgbouncerBinary();
const missing = !databaseUrl ? 'they need PostgreSQL (DATABASE_URL)' : !binary ? 'pgbouncer is not installed (apt-get install pgbouncer)' : undefined;
if (missing) process.stdout.write(`\nThe PgBouncer tests are ${process.env.CI ? 'FAILING (CI runs them)' : 'SKIPPED'}: ${missing}.\n`);

let own: OwnDatabase;
let bouncer: PgBouncer;
let graph: GraphDouble;
let receiver: WebhookReceiver;
let server: TestServer;
let pooled: Db;
const opened: Db[] = [];

/**
 * The service's database through PgBouncer, configured as the README says for it: no
 * statement_timeout at connect (PgBouncer refuses that startup parameter; the role carries the
 * timeout instead), and `preparedStatements` as given.
 */
function throughBouncer(preparedStatements: boolean, poolSize = 5, url = bouncer.url): Db {
  const db = createDatabase({ databaseUrl: url, pgliteDir: 'memory://', poolSize, statementTimeoutMs: 0, preparedStatements });
  opened.push(db);
  return db;
}

describe.skipIf(missing)('behind PgBouncer in transaction pooling mode', () => {
  beforeAll(async () => {
    own = await ownDatabase();
    bouncer = await PgBouncer.start(binary!, own.url);
    graph = await GraphDouble.start();
    receiver = await WebhookReceiver.start();
    pooled = throughBouncer(false);
    // Every query through PgBouncer; the job workers' LISTEN on DATABASE_DIRECT_URL, as the README
    // says (the migrations too: ownDatabase ran them directly).
    server = await startServer({
      db: pooled,
      databaseUrl: bouncer.url,
      jobs: true,
      config: {
        metaGraphUrl: graph.url,
        outboundAllowPrivateUrls: true,
        retryBaseMs: 20,
        databasePreparedStatements: false,
        databaseStatementTimeoutMs: 0,
        databaseDirectUrl: own.url,
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await Promise.all(opened.map((db) => db.destroy().catch(() => {})));
    await graph?.close();
    await receiver?.close();
    await bouncer?.stop();
    await own?.drop();
  });

  it('when statements are named, then one that lands on another server connection fails: DATABASE_PREPARED_STATEMENTS=false is what the pooled service relies on', async () => {
    // The run's database, whose PgBouncer pool no one else uses (the job workers poll the other).
    const url = bouncer.urlFor(databaseUrl!);
    const outcomes: Record<string, string> = {};
    for (const prepared of [true, false]) {
      const db = throughBouncer(prepared, 1, url);
      const query = sql<{ n: number }>`select ${7}::int as n`;
      await query.execute(db);
      // Another client's transaction holds the server connection that statement went to
      // (PgBouncer hands out the one used last), so the next one runs on another.
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query('begin');
      await holder.query('select 1');
      try {
        const { rows } = await query.execute(db);
        outcomes[String(prepared)] = `answered ${rows[0]!.n}`;
      } catch (err) {
        outcomes[String(prepared)] = `failed ${(err as { code?: string }).code}: ${(err as Error).message}`;
      } finally {
        await holder.query('rollback');
        await holder.end();
      }
    }

    expect(outcomes).toEqual({ true: expect.stringMatching(/^failed 26000: prepared statement "sf_\d+" does not exist$/), false: 'answered 7' });
  });

  it('when the core paths run through it, then they answer as they do on PostgreSQL directly', async () => {
    const ws: TestWorkspace = await createWorkspace(server);
    const post = (path: string, body: unknown, key?: string) =>
      request(server, 'POST', path, { apiKey: ws.apiKey, body, ...(key && { headers: { 'idempotency-key': key } }) });
    const { data: endpoint, response: created } = await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}/hooks`, events: ['*'] } });
    expect(created.status).toBe(201);

    // Contacts: create, list, read.
    const contact = await post('/v1/contacts', buildContact());
    const { data: list } = await ws.api.GET('/contacts');
    const { data: read } = await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.body.id } } });
    expect(contact.status).toBe(201);
    expect(list!.data.map((c) => c.id)).toEqual([contact.body.id]);
    expect(read).toEqual(contact.body);

    // An Idempotency-Key: the retry replays the first answer and stores nothing more.
    const key = randomUUID();
    const body = buildContact();
    const first = await post('/v1/contacts', body, key);
    const again = await post('/v1/contacts', body, key);
    expect([first.status, again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 201, 'true']);
    expect(again.body).toEqual(first.body);
    const { data: afterKey } = await ws.api.GET('/contacts');
    expect(afterKey!.pagination.total).toBe(2);

    // A message through the Graph double, and its status.
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { data: queued } = await ws.api.POST('/messages', {
      body: { contactId: contact.body.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' } },
    });
    expect(queued).toMatchObject({ status: 'queued' });
    const messageStatus = async () => {
      const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: queued!.threadId } } });
      return data!.data.find((m) => m.id === queued!.id)!;
    };
    await waitFor('the message sent', async () => (await messageStatus()).status === 'sent');
    expect(graph.to(meta.externalId)).toHaveLength(1);
    expect((await messageStatus()).externalId).toMatch(/^wamid\./);

    // A thread change, with its history.
    const { data: closed, response: patched } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: queued!.threadId } }, body: { status: 'closed' } });
    expect(patched.status).toBe(200);
    expect(closed).toMatchObject({ status: 'closed', closedAt: expect.any(String) });
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: queued!.threadId } } });
    expect(history!.data.at(-1)).toMatchObject({ field: 'status', from: 'open', to: 'closed', actor: { type: 'api_key', id: ws.keyId } });

    // The events, delivered to the endpoint.
    const types = ['contact.created', 'contact.created', 'thread.created', 'message.created', 'message.updated', 'thread.updated'];
    const delivered = await receiver.waitFor(types.length, '/hooks');
    expect(delivered.map((r) => JSON.parse(r.body).type).sort()).toEqual([...types].sort());
    await waitFor('the deliveries recorded as succeeded', async () => {
      const { data } = await ws.api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id: endpoint!.id } } });
      return data!.data.length === types.length && data!.data.every((d) => d.status === 'succeeded');
    });
  });
});
