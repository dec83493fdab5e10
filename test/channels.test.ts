// Channels: sandbox or connected to Meta; creating, reading and changing them; Meta secrets are
// write-only (never in a response or a log line) and stored sealed.
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../src/secrets.js';
import { createChannel, rotateChannelSecrets } from '../src/channels/settings.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest, migrations } from '../src/db/migrate.js';
import { provision } from '../src/provisioning.js';
import { clientFor, createWorkspace, ISO_MS, request, UUID } from './helpers/api.js';
import { LogCapture } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
const logs = new LogCapture();
beforeAll(async () => {
  server = await startServer({ logs: logs.destination });
});
afterAll(async () => {
  await server.close();
});

const storedChannels = (workspaceId: string) =>
  server.db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();

let sequence = 0;
/** Meta settings with secrets unique to the test, so a leak is found by searching for them. */
function metaSettings() {
  const n = `${Date.now()}${sequence++}`;
  return {
    // Unique across test files too: a Meta account connects to one channel of all workspaces.
    externalId: `1065${randomInt(10 ** 11, 10 ** 12)}`,
    accessToken: `EAAtoken${n}SECRET`,
    appSecret: `appsecret${n}SECRET`,
    verifyToken: `verify${n}SECRET`,
  };
}

const secretsOf = (meta: ReturnType<typeof metaSettings>) => [meta.accessToken, meta.appSecret, meta.verifyToken];

describe('GET /channels', () => {
  it('when the workspace is new, then it lists its sandbox whatsapp and instagram channels', async () => {
    const { api, workspaceId, channels } = await createWorkspace(server);
    await createWorkspace(server);

    const { data, response } = await api.GET('/channels');

    expect(response.status).toBe(200);
    const sandbox = (id: string, type: string, name: string) => ({
      id,
      type,
      name,
      provider: 'sandbox',
      externalId: null,
      webhookPath: null,
      defaultAgentId: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect(channels).toEqual([
      { id: expect.stringMatching(UUID), type: 'whatsapp', name: 'WhatsApp' },
      { id: expect.stringMatching(UUID), type: 'instagram', name: 'Instagram' },
    ]);
    expect(data).toEqual({
      data: [sandbox(channels[0]!.id, 'whatsapp', 'WhatsApp'), sandbox(channels[1]!.id, 'instagram', 'Instagram')],
      pagination: { total: 2, page: 1, limit: 20 },
    });
    const rows = await storedChannels(workspaceId);
    expect(rows.map((r) => [r.id, r.provider, r.external_id, r.secrets, r.default_agent_id])).toEqual(channels.map((c) => [c.id, 'sandbox', null, null, null]));
  });

  it('when a second key of the same workspace lists channels, then it sees the same two', async () => {
    const first = await createWorkspace(server);
    const second = await createWorkspace(server, { workspaceId: first.workspaceId, scopes: ['messages:read'] });

    const { data, response } = await second.api.GET('/channels');

    expect(response.status).toBe(200);
    expect(second.channels).toEqual(first.channels);
    expect(data!.data.map((c) => c.id)).toEqual(first.channels.map((c) => c.id));
    expect(data!.pagination).toEqual({ total: 2, page: 1, limit: 20 });
  });

  it('when limit is 1, then page 1 is whatsapp, page 2 instagram and page 3 empty with total 2', async () => {
    const { api, channels } = await createWorkspace(server);

    const pages = [];
    for (const page of [1, 2, 3]) pages.push((await api.GET('/channels', { params: { query: { page, limit: 1 } } })).data);

    expect(pages.map((p) => [p!.data.map((c) => c.id), p!.pagination])).toEqual([
      [[channels[0]!.id], { total: 2, page: 1, limit: 1 }],
      [[channels[1]!.id], { total: 2, page: 2, limit: 1 }],
      [[], { total: 2, page: 3, limit: 1 }],
    ]);
  });

  it('when the key lacks messages:read, then it answers 403 forbidden naming the scope', async () => {
    const { apiKey } = await createWorkspace(server, { scopes: ['agents:read', 'messages:write'] });

    const { error, response } = await clientFor(server, apiKey).GET('/channels');

    expect(response.status).toBe(403);
    expect(error).toEqual({ error: { code: 'forbidden', message: 'This API key lacks the scope messages:read.', requestId: expect.any(String) } });
  });
});

describe('POST /channels', () => {
  it('when a sandbox channel is created, then it answers 201 and lists it after the first two', async () => {
    const { api, workspaceId } = await createWorkspace(server);

    const { data, response } = await api.POST('/channels', { body: { type: 'instagram', name: 'Instagram (teste)', provider: 'sandbox' } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      type: 'instagram',
      name: 'Instagram (teste)',
      provider: 'sandbox',
      externalId: null,
      webhookPath: null,
      defaultAgentId: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const { data: list } = await api.GET('/channels');
    expect(list!.data.at(-1)).toEqual(data);
    expect((await storedChannels(workspaceId)).at(-1)).toMatchObject({ id: data!.id, provider: 'sandbox', secrets: null });
  });

  it('when a Meta channel is created, then the answer has its webhookPath and no secret, and the secrets are stored sealed', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const meta = metaSettings();

    const { data, response } = await api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      type: 'whatsapp',
      name: 'WhatsApp Vendas',
      provider: 'meta',
      externalId: meta.externalId,
      webhookPath: `/webhooks/meta/${data!.id}`,
      defaultAgentId: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const row = (await storedChannels(workspaceId)).find((r) => r.id === data!.id)!;
    expect(row.external_id).toBe(meta.externalId);
    expect(row.secrets).toMatch(/^v1\.[0-9a-f]{8}\.[\w-]+\.[\w-]+\.[\w-]+$/);
    for (const secret of secretsOf(meta)) expect(row.secrets).not.toContain(secret);
    expect(JSON.parse(server.secrets!.open(row.secrets!))).toEqual({ accessToken: meta.accessToken, appSecret: meta.appSecret, verifyToken: meta.verifyToken });
    const read = await api.GET('/channels/{id}', { params: { path: { id: data!.id } } });
    expect(read.data).toEqual(data);
  });

  it('when a Meta channel comes without its settings, then it answers 400 and stores nothing', async () => {
    const { apiKey, workspaceId } = await createWorkspace(server);

    const res = await request(server, 'POST', '/v1/channels', { apiKey, body: { type: 'whatsapp', name: 'Sem credenciais', provider: 'meta' } });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(await storedChannels(workspaceId)).toHaveLength(2);
  });

  it('when a sandbox channel comes with Meta settings, then it answers 400 and stores nothing', async () => {
    const { apiKey, workspaceId } = await createWorkspace(server);

    const res = await request(server, 'POST', '/v1/channels', {
      apiKey,
      body: { type: 'whatsapp', name: 'Confuso', provider: 'sandbox', meta: metaSettings() },
    });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(await storedChannels(workspaceId)).toHaveLength(2);
  });

  it('when the key lacks channels:write, then it answers 403 naming it (all scopes include it)', async () => {
    const { apiKey, scopes } = await createWorkspace(server, { scopes: ['messages:read', 'messages:write'] });
    const all = await createWorkspace(server);

    const { error, response } = await clientFor(server, apiKey).POST('/channels', { body: { type: 'whatsapp', name: 'x', provider: 'sandbox' } });

    expect(scopes).not.toContain('channels:write');
    expect(all.scopes).toContain('channels:write');
    expect(response.status).toBe(403);
    expect(error).toEqual({ error: { code: 'forbidden', message: 'This API key lacks the scope channels:write.', requestId: expect.any(String) } });
  });
});

/** The 409 of a Meta account another channel holds: named (`existingId`) when it is the workspace's own. */
const taken = (error: unknown, existingId?: string) =>
  expect(error).toEqual({
    error: {
      code: 'conflict',
      message: 'This Meta account is already connected to another channel.',
      details: [{ path: '/body/meta/externalId', message: 'is connected to another channel', ...(existingId && { existingId }) }],
      requestId: expect.any(String),
    },
  });

describe('POST /channels: one channel per Meta account', () => {
  it('when the Meta account is connected to a channel of another workspace, or of the same one (then named), then it answers 409 conflict and stores nothing', async () => {
    const first = await createWorkspace(server);
    const second = await createWorkspace(server);
    const meta = metaSettings();
    const created = await first.api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta } });

    const elsewhere = await second.api.POST('/channels', {
      body: { type: 'whatsapp', name: 'Outro', provider: 'meta', meta: { ...metaSettings(), externalId: meta.externalId } },
    });
    const again = await first.api.POST('/channels', {
      body: { type: 'whatsapp', name: 'De novo', provider: 'meta', meta: { ...metaSettings(), externalId: meta.externalId } },
    });

    expect(created.response.status).toBe(201);
    expect([elsewhere.response.status, again.response.status]).toEqual([409, 409]);
    taken(elsewhere.error);
    taken(again.error, created.data!.id);
    expect(await storedChannels(second.workspaceId)).toHaveLength(2);
    expect((await storedChannels(first.workspaceId)).map((r) => r.external_id)).toEqual([null, null, meta.externalId]);
  });

  it('when two workspaces connect the same Meta account at once, then one gets 201 and the other 409', async () => {
    const workspaces = await Promise.all([createWorkspace(server), createWorkspace(server)]);
    const { externalId } = metaSettings();

    const answers = await Promise.all(
      workspaces.map((ws) =>
        ws.api.POST('/channels', { body: { type: 'instagram', name: 'Instagram Loja', provider: 'meta', meta: { ...metaSettings(), externalId } } }),
      ),
    );

    expect(answers.map((a) => a.response.status).sort()).toEqual([201, 409]);
    taken(answers.find((a) => a.response.status === 409)!.error);
    const rows = await server.db.selectFrom('channels').select('workspace_id').where('external_id', '=', externalId).execute();
    expect(rows).toHaveLength(1);
  });

  it('when the same externalId is connected on the other type, then it is another account: 201', async () => {
    const ws = await createWorkspace(server);
    const meta = metaSettings();

    const whatsapp = await ws.api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp', provider: 'meta', meta } });
    const instagram = await ws.api.POST('/channels', {
      body: { type: 'instagram', name: 'Instagram', provider: 'meta', meta: { ...metaSettings(), externalId: meta.externalId } },
    });

    expect([whatsapp.response.status, instagram.response.status]).toEqual([201, 201]);
  });

  it('when the channel holding a Meta account goes back to the sandbox, then another workspace may connect the account', async () => {
    const first = await createWorkspace(server);
    const second = await createWorkspace(server);
    const meta = metaSettings();
    const { data: channel } = await first.api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta } });

    await first.api.PATCH('/channels/{id}', { params: { path: { id: channel!.id } }, body: { provider: 'sandbox' } });
    const { response } = await second.api.POST('/channels', {
      body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta: { ...metaSettings(), externalId: meta.externalId } },
    });

    expect(response.status).toBe(201);
  });
});

describe('GET /channels/{id}', () => {
  it('when the channel is of another workspace or unknown, then it answers 404', async () => {
    const a = await createWorkspace(server);
    const b = await createWorkspace(server);

    for (const id of [a.channels[0]!.id, randomUUID()]) {
      const { error, response } = await b.api.GET('/channels/{id}', { params: { path: { id } } });
      expect(response.status).toBe(404);
      expect(error).toEqual({ error: { code: 'not_found', message: 'Channel not found.', requestId: expect.any(String) } });
    }
  });
});

describe('PATCH /channels/{id}', () => {
  async function metaChannel() {
    const ws = await createWorkspace(server);
    const meta = metaSettings();
    const { data } = await ws.api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta } });
    return { ws, meta, channel: data! };
  }
  const openStored = async (workspaceId: string, id: string) => {
    const row = (await storedChannels(workspaceId)).find((r) => r.id === id)!;
    return row.secrets === null ? null : JSON.parse(server.secrets!.open(row.secrets));
  };

  it('when a sandbox channel is connected to Meta with every setting, then it becomes a meta channel', async () => {
    const ws = await createWorkspace(server);
    const meta = metaSettings();
    const id = ws.channels[0]!.id;

    const { data, response } = await ws.api.PATCH('/channels/{id}', { params: { path: { id } }, body: { provider: 'meta', meta, name: 'WhatsApp Loja' } });

    expect(response.status).toBe(200);
    expect(data).toEqual({
      id,
      type: 'whatsapp',
      name: 'WhatsApp Loja',
      provider: 'meta',
      externalId: meta.externalId,
      webhookPath: `/webhooks/meta/${id}`,
      defaultAgentId: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect(data!.updatedAt >= data!.createdAt).toBe(true);
    expect(await openStored(ws.workspaceId, id)).toEqual({ accessToken: meta.accessToken, appSecret: meta.appSecret, verifyToken: meta.verifyToken });
  });

  it('when a sandbox channel is connected to Meta without every setting, then it answers 400 naming the missing ones', async () => {
    const ws = await createWorkspace(server);
    const id = ws.channels[0]!.id;

    const { error, response } = await ws.api.PATCH('/channels/{id}', {
      params: { path: { id } },
      body: { provider: 'meta', meta: { externalId: '106540352242922' } },
    });

    expect(response.status).toBe(400);
    expect(error!.error.details!.map((d) => d.path)).toEqual(['/body/meta/accessToken', '/body/meta/appSecret', '/body/meta/verifyToken']);
    expect((await storedChannels(ws.workspaceId))[0]).toMatchObject({ provider: 'sandbox', secrets: null });
  });

  it('when only the access token is replaced, then the other settings are kept', async () => {
    const { ws, meta, channel } = await metaChannel();

    const { data, response } = await ws.api.PATCH('/channels/{id}', {
      params: { path: { id: channel.id } },
      body: { meta: { accessToken: 'EAAnewtokenSECRET' } },
    });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...channel, updatedAt: expect.stringMatching(ISO_MS) });
    expect(await openStored(ws.workspaceId, channel.id)).toEqual({
      accessToken: 'EAAnewtokenSECRET',
      appSecret: meta.appSecret,
      verifyToken: meta.verifyToken,
    });
  });

  it('when a meta channel goes back to the sandbox, then its Meta settings are forgotten', async () => {
    const { ws, channel } = await metaChannel();

    const { data } = await ws.api.PATCH('/channels/{id}', { params: { path: { id: channel.id } }, body: { provider: 'sandbox' } });

    expect(data).toEqual({ ...channel, provider: 'sandbox', externalId: null, webhookPath: null, updatedAt: expect.stringMatching(ISO_MS) });
    expect((await storedChannels(ws.workspaceId)).find((r) => r.id === channel.id)).toMatchObject({ external_id: null, secrets: null });
  });

  it('when the type would change, then it answers 409 and the channel stays as it was', async () => {
    const ws = await createWorkspace(server);
    const id = ws.channels[0]!.id;

    const { error, response } = await ws.api.PATCH('/channels/{id}', { params: { path: { id } }, body: { type: 'instagram', name: 'Outro' } });

    expect(response.status).toBe(409);
    expect(error).toEqual({
      error: {
        code: 'conflict',
        message: "A channel's type cannot change; create another channel.",
        details: [{ path: '/body/type', message: 'the channel is whatsapp' }],
        requestId: expect.any(String),
      },
    });
    expect((await storedChannels(ws.workspaceId))[0]).toMatchObject({ type: 'whatsapp', name: 'WhatsApp' });
  });

  it('when a channel would connect to a Meta account another channel holds, then it answers 409 and stays as it was; its own account again is a 200', async () => {
    const { ws, meta, channel } = await metaChannel();
    const other = await createWorkspace(server);
    const sibling = (await ws.api.POST('/channels', { body: { type: 'whatsapp', name: 'Outro número', provider: 'meta', meta: metaSettings() } })).data!;

    const fromSandbox = await other.api.PATCH('/channels/{id}', {
      params: { path: { id: other.channels[0]!.id } },
      body: { provider: 'meta', meta: { ...metaSettings(), externalId: meta.externalId } },
    });
    const repointed = await ws.api.PATCH('/channels/{id}', { params: { path: { id: sibling.id } }, body: { meta: { externalId: meta.externalId } } });
    const same = await ws.api.PATCH('/channels/{id}', {
      params: { path: { id: channel.id } },
      body: { name: 'WhatsApp Vendas 2', meta: { externalId: meta.externalId } },
    });

    expect([fromSandbox.response.status, repointed.response.status, same.response.status]).toEqual([409, 409, 200]);
    // Another workspace's channel is not named; the workspace's own is.
    taken(fromSandbox.error);
    taken(repointed.error, channel.id);
    expect((await storedChannels(other.workspaceId))[0]).toMatchObject({ provider: 'sandbox', external_id: null, secrets: null });
    expect((await storedChannels(ws.workspaceId)).find((r) => r.id === sibling.id)).toMatchObject({
      external_id: sibling.externalId,
      updated_at: new Date(sibling.updatedAt),
    });
    expect(same.data).toMatchObject({ name: 'WhatsApp Vendas 2', externalId: meta.externalId });
  });

  it('when the channel is of another workspace, then it answers 404 and nothing changes', async () => {
    const a = await createWorkspace(server);
    const b = await createWorkspace(server);

    const { response } = await b.api.PATCH('/channels/{id}', { params: { path: { id: a.channels[0]!.id } }, body: { name: 'Invasor' } });

    expect(response.status).toBe(404);
    expect((await storedChannels(a.workspaceId))[0]!.name).toBe('WhatsApp');
  });
});

describe('Meta secrets', () => {
  it('when channels are created and changed, then no secret appears in any response or log line', async () => {
    const ws = await createWorkspace(server);
    const first = metaSettings();
    const second = metaSettings();
    const bodies: string[] = [];

    const created = await request(server, 'POST', '/v1/channels', { apiKey: ws.apiKey, body: { type: 'whatsapp', name: 'W', provider: 'meta', meta: first } });
    bodies.push(JSON.stringify(created.body));
    bodies.push(JSON.stringify((await request(server, 'PATCH', `/v1/channels/${created.body.id}`, { apiKey: ws.apiKey, body: { meta: second } })).body));
    bodies.push(JSON.stringify((await request(server, 'GET', `/v1/channels/${created.body.id}`, { apiKey: ws.apiKey })).body));
    bodies.push(JSON.stringify((await request(server, 'GET', '/v1/channels', { apiKey: ws.apiKey })).body));
    // A failing request with secrets in its body is logged too.
    bodies.push(
      JSON.stringify(
        (await request(server, 'POST', '/v1/channels', { apiKey: ws.apiKey, body: { type: 'fax', name: 'W', provider: 'meta', meta: first } })).body,
      ),
    );

    const logged = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(logged).toContain(created.body.id);
    for (const secret of [...secretsOf(first), ...secretsOf(second)]) {
      for (const body of bodies) expect(body).not.toContain(secret);
      expect(logged).not.toContain(secret);
    }
  });
});

describe('rotating SECRETS_KEY (npm run secrets:rotate)', () => {
  it('when the key changes, then secrets sealed under the previous key are re-sealed under the new one and still open', async () => {
    // A database of its own: a rotation re-seals every channel it finds.
    const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
    try {
      await migrateToLatest(db);
      const { workspaceId } = await provision(db, { plan: 'pro', scopes: ['channels:write'] });
      const oldKey = randomBytes(32);
      const meta = metaSettings();
      const channel = await createChannel(db, createSecretBox(oldKey), workspaceId, { type: 'whatsapp', name: 'W', provider: 'meta', meta });
      const newKey = randomBytes(32);
      const rotated = createSecretBox(newKey, [oldKey]);

      const first = await rotateChannelSecrets(db, rotated);
      const second = await rotateChannelSecrets(db, rotated);

      expect(first).toEqual({ keyId: rotated.keyId, resealed: 1, remaining: 0 });
      expect(second).toEqual({ keyId: rotated.keyId, resealed: 0, remaining: 0 });
      const row = await db.selectFrom('channels').select('secrets').where('id', '=', channel.id).executeTakeFirstOrThrow();
      // The new key alone opens it now: the previous one can be dropped.
      expect(JSON.parse(createSecretBox(newKey).open(row.secrets!))).toEqual({
        accessToken: meta.accessToken,
        appSecret: meta.appSecret,
        verifyToken: meta.verifyToken,
      });
    } finally {
      await db.destroy();
    }
  });
});

describe('migration 0010 (one channel per Meta account)', () => {
  it('when two channels already share a Meta account, then it stops naming them, and applies once one is back in the sandbox', async () => {
    const db = createDatabase({ databaseUrl: undefined, pgliteDir: 'memory://' });
    try {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      expect((await migrator.migrateTo('0009_idempotency_keys_without_foreign_key')).error).toBeUndefined();
      const workspaces = [randomUUID(), randomUUID()];
      for (const id of workspaces) await sql`insert into workspaces (id, name) values (${id}, 'W')`.execute(db);
      // Each a second after the last: "oldest first" must not hang on the clock's resolution (PGlite's can tie).
      let createdAt = Date.parse('2026-01-01T00:00:00Z');
      const channel = async (workspaceId: string, type: string, externalId: string | null) => {
        const id = randomUUID();
        createdAt += 1_000;
        const provider = externalId === null ? 'sandbox' : 'meta';
        const secrets = externalId === null ? null : 'v1.sealed';
        await sql`insert into channels (workspace_id, id, type, name, provider, external_id, secrets, created_at, updated_at)
                  values (${workspaceId}, ${id}, ${type}, 'C', ${provider}, ${externalId}, ${secrets}, ${new Date(createdAt)}, now())`.execute(db);
        return id;
      };
      const older = await channel(workspaces[0]!, 'whatsapp', '106540352242922');
      const newer = await channel(workspaces[1]!, 'whatsapp', '106540352242922');
      await channel(workspaces[1]!, 'instagram', '106540352242922');
      await channel(workspaces[0]!, 'whatsapp', null);
      await channel(workspaces[1]!, 'whatsapp', null);

      const refused = await migrateToLatest(db).then(
        () => undefined,
        (err: Error) => err.message,
      );
      await sql`update channels set provider = 'sandbox', external_id = null, secrets = null where id = ${newer}`.execute(db);
      const applied = await migrateToLatest(db);

      expect(refused).toContain(
        `migration 0010_one_channel_per_meta_account failed: a Meta account may be connected to one channel only, and these are connected to several (oldest first): whatsapp 106540352242922: channels ${older}, ${newer}. `,
      );
      expect(applied[0]).toBe('0010_one_channel_per_meta_account');
      const duplicate = await channel(workspaces[1]!, 'whatsapp', '106540352242922').then(
        () => undefined,
        (err: { code?: string; constraint?: string }) => [err.code, err.constraint],
      );
      expect(duplicate).toEqual(['23505', 'channels_meta_account_key']);
    } finally {
      await db.destroy();
    }
  });
});
