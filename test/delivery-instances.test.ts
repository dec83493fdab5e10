// Delivery across instances and crashes, on PostgreSQL: two app+worker sets on one database send 200
// messages exactly once each, in order per contact; and a server killed with SIGKILL right after a
// 201 whose send was failing leaves the message to the next server, which sends it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { buildContact, buildPhone, checkedClient, createWorkspace } from './helpers/api.js';
import { createMetaChannel } from './helpers/channels.js';
import { GraphDouble, graphError, sentAnswer } from './helpers/graph.js';
import { freePort, waitFor } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];

describe.skipIf(!databaseUrl)('two instances on one PostgreSQL database (needs DATABASE_URL)', () => {
  let graph: GraphDouble;
  let own: OwnDatabase;
  const dbs: Db[] = [];
  const servers: TestServer[] = [];
  beforeAll(async () => {
    graph = await GraphDouble.start();
    own = await ownDatabase();
    for (const name of ['a', 'b']) {
      const db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 5 });
      dbs.push(db);
      // Each instance reaches Graph under its own prefix, so the double tells who sent what.
      const metaGraphUrl = graph.url.replace(/\/v23\.0$/, `/${name}/v23.0`);
      servers.push(
        await startServer({ db, databaseUrl: own.url, jobs: true, config: { metaGraphUrl, retryBaseMs: 20, jobPollMs: 200, deliveryConcurrency: 8 } }),
      );
    }
  });
  afterAll(async () => {
    for (const server of servers) await server.close();
    for (const db of dbs) await db.destroy();
    await graph.close();
    await own?.drop();
  });

  it('when 200 messages to 20 contacts are created through both, then each is sent exactly once, in order per contact, by both instances', async () => {
    const [a, b] = servers as [TestServer, TestServer];
    const ws = await createWorkspace(a);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const apiB = checkedClient(`${b.baseUrl}/v1`, ws.apiKey);
    const contacts = await Promise.all(
      Array.from({ length: 20 }, async () => (await ws.api.POST('/contacts', { body: buildContact({ phone: buildPhone() }) })).data!),
    );
    graph.answer((request) => (request.externalId === meta.externalId ? { ...sentAnswer(request), delayMs: 5 } : undefined));

    for (let round = 1; round <= 10; round++) {
      await Promise.all(
        contacts.map(async (contact, i) => {
          const api = (i + round) % 2 === 0 ? ws.api : apiB;
          const { response } = await api.POST('/messages', {
            body: {
              contactId: contact.id,
              channelId: meta.channel.id,
              template: { name: 'sequencia', language: 'pt_BR', parameters: [contact.phone!, String(round)] },
            },
          });
          expect(response.status).toBe(201);
        }),
      );
    }
    await waitFor(
      '200 messages sent',
      async () => {
        const row = await a.db
          .selectFrom('messages')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('workspace_id', '=', ws.workspaceId)
          .where('status', '=', 'sent')
          .executeTakeFirstOrThrow();
        return Number(row.n) === 200;
      },
      60_000,
    );

    const requests = graph.to(meta.externalId);
    const parameters = (r: (typeof requests)[number]) => r.body.template.components[0].parameters.map((p: { text: string }) => p.text) as [string, string];
    expect(requests).toHaveLength(200);
    expect(new Set(requests.map((r) => parameters(r).join('#'))).size).toBe(200);
    for (const contact of contacts) {
      const rounds = requests.filter((r) => parameters(r)[0] === contact.phone).map((r) => Number(parameters(r)[1]));
      expect(rounds).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    }
    const byInstance = { a: requests.filter((r) => r.path.startsWith('/a/')).length, b: requests.filter((r) => r.path.startsWith('/b/')).length };
    expect(byInstance.a + byInstance.b).toBe(200);
    expect(byInstance.a).toBeGreaterThan(0);
    expect(byInstance.b).toBeGreaterThan(0);
    expect(await a.db.selectFrom('jobs').select('id').where('workspace_id', '=', ws.workspaceId).execute()).toEqual([]);
    graph.answer(undefined);
  }, 120_000);
});

describe.skipIf(!databaseUrl)('a server killed mid-delivery (needs DATABASE_URL)', () => {
  let graph: GraphDouble;
  let own: OwnDatabase;
  let db: Db;
  const services: Service[] = [];
  beforeAll(async () => {
    graph = await GraphDouble.start();
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
  });
  afterAll(async () => {
    for (const service of services) await service.kill();
    await db.destroy();
    await graph.close();
    await own?.drop();
  });

  it(
    'when the server is killed with SIGKILL right after a 201 whose send was failing, then the next server sends it',
    async () => {
      const env = {
        DATABASE_URL: own.url,
        SECRETS_KEY: randomBytes(32).toString('base64'),
        META_GRAPH_URL: graph.url,
        META_GRAPH_TIMEOUT_MS: '1000',
        JOB_LEASE_MS: '3000',
        JOB_POLL_MS: '200',
        RETRY_BASE_MS: '200',
      };
      const first = new Service(await freePort(), env);
      services.push(first);
      const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Crash' });
      await first.waitForListening(1);
      const api = checkedClient(`http://127.0.0.1:${first.port}/v1`, key.apiKey);
      const { data: channel } = await api.POST('/channels', {
        body: {
          type: 'whatsapp',
          name: 'WhatsApp',
          provider: 'meta',
          meta: { externalId: `1065${Date.now()}`, accessToken: 'EAAcrash', appSecret: 'secret', verifyToken: 'verify' },
        },
      });
      const { data: contact } = await api.POST('/contacts', { body: buildContact({ phone: buildPhone() }) });
      graph.answer(() => graphError(2, 'Service temporarily unavailable', 503));

      const { data: message, response } = await api.POST('/messages', {
        body: { contactId: contact!.id, channelId: channel!.id, template: { name: 'hello_world', language: 'en_US' } },
      });
      expect(response.status).toBe(201);
      await waitFor('a failing send', () => graph.to(channel!.externalId!).length > 0, 10_000);
      process.kill(-first.child.pid!, 'SIGKILL');
      await first.kill();
      const failedBefore = graph.to(channel!.externalId!).length;
      graph.answer(undefined);

      const second = new Service(await freePort(), env);
      services.push(second);
      await second.waitForListening(1);
      const stored = async (): Promise<Pick<Message, 'status' | 'externalId'>> => {
        const row = await db.selectFrom('messages').select(['status', 'external_id']).where('id', '=', message!.id).executeTakeFirstOrThrow();
        return { status: row.status, externalId: row.external_id };
      };
      await waitFor('sent by the second server', async () => (await stored()).status === 'sent', 20_000);

      const requests = graph.to(channel!.externalId!);
      const accepted = requests.filter((r) => 'status' in r.answer! && r.answer.status === 200);
      expect(failedBefore).toBeGreaterThanOrEqual(1);
      expect(accepted).toHaveLength(1);
      expect(await stored()).toEqual({
        status: 'sent',
        externalId: (accepted[0]!.answer as { body: { messages: Array<{ id: string }> } }).body.messages[0]!.id,
      });
    },
    START_MS * 2 + 60_000,
  );
});

describe.skipIf(!databaseUrl)('SECRETS_KEY in production (needs DATABASE_URL)', () => {
  let own: OwnDatabase;
  let db: Db;
  const services: Service[] = [];
  beforeAll(async () => {
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
  });
  afterAll(async () => {
    for (const service of services) await service.kill();
    await db.destroy();
    await own?.drop();
  });

  async function exitOf(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const service = new Service(await freePort(), { DATABASE_URL: own.url, ...env });
    services.push(service);
    await waitFor('the service to exit', () => !service.running, START_MS);
    return { code: service.child.exitCode, stderr: service.stderr };
  }

  it(
    'when it is missing and a channel is connected to Meta, then the service refuses to start, saying why',
    async () => {
      const ws = await provision(db, { plan: 'pro', scopes: ['channels:write'] });
      await db
        .updateTable('channels')
        .set({ provider: 'meta', external_id: '1065', secrets: 'v1.00000000.a.b.c' })
        .where('id', '=', ws.channels[0]!.id)
        .execute();

      const { code, stderr } = await exitOf({});

      expect(code).toBe(2);
      expect(stderr).toMatch(/configuration error: 1 channel secret is sealed under key 00000000, but SECRETS_KEY is not set; start it with the key/);
    },
    START_MS + 10_000,
  );

  it(
    'when it is malformed, then the service refuses to start, saying what it must be',
    async () => {
      const { code, stderr } = await exitOf({ SECRETS_KEY: 'c2hvcnQ=' });

      expect(code).toBe(2);
      expect(stderr).toMatch(/configuration error: SECRETS_KEY must be the base64 of 32 random bytes/);
    },
    START_MS + 10_000,
  );
});
