// No secret at rest in clear: after every operation that takes or makes one (a webhook endpoint's
// secret, a Meta channel's access token, app secret and verify token), with and without
// Idempotency-Key, its replay, and `npm run secrets:rotate`, every row of every table of the database
// is read as text and holds none of them (nor their base64, base64url or hex); a replay still
// answers the secret, and one whose stored answer this instance cannot open shows none.
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, keyIdOf } from '../src/secrets.js';
import type { Db } from '../src/db/database.js';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { databaseUrl, ownDatabase, startServer, testSecretsKey, type OwnDatabase, type TestServer } from './helpers/server.js';

let own: OwnDatabase | undefined;
let server: TestServer;
let ws: TestWorkspace;
/** Every secret the tests have seen so far: none may ever be at rest in clear. */
const secrets = new Set<string>();

beforeAll(async () => {
  // A database of its own on PostgreSQL: the dump reads it whole, and the rotation re-seals it whole.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, config: { outboundAllowPrivateUrls: true } });
  ws = await createWorkspace(server);
});
afterAll(async () => {
  await server?.close();
  await own?.drop();
});

/** Each row of each table of the database as PostgreSQL prints it (`select t::text`), prefixed with its table. */
async function dumpDatabase(db: Db): Promise<string[]> {
  const { rows: tables } = await sql<{ schema: string; name: string }>`
    select table_schema as schema, table_name as name from information_schema.tables
     where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`.execute(db);
  const lines: string[] = [];
  for (const table of tables) {
    const { rows } = await sql<{ row: string }>`select t::text as row from ${sql.table(`${table.schema}.${table.name}`)} t`.execute(db);
    lines.push(...rows.map(({ row }) => `${table.schema}.${table.name} ${row}`));
  }
  return lines;
}

/** A secret as it may be written down: itself, its base64 (unpadded), base64url and hex; a whsec_ one also its key bytes so. */
function formsOf(secret: string): string[] {
  const encodings = (bytes: Buffer) => [bytes.toString('base64').replace(/=+$/, ''), bytes.toString('base64url'), bytes.toString('hex')];
  const forms = [secret, ...encodings(Buffer.from(secret))];
  if (secret.startsWith('whsec_')) forms.push(secret.slice('whsec_'.length), ...encodings(Buffer.from(secret.slice('whsec_'.length), 'base64')));
  return forms;
}

/** Dumps the database and finds none of the secrets seen so far in any form; the lines that hold one otherwise. */
async function expectNoSecretAtRest(): Promise<void> {
  const dump = await dumpDatabase(server.db);
  // The dump reads what the operations wrote: the workspace's rows are in it.
  expect(dump.some((line) => line.startsWith('public.idempotency_keys ') || line.startsWith('public.channels '))).toBe(true);
  expect(dump.join('\n')).toContain(ws.workspaceId);
  const leaks = [...secrets].flatMap((secret) => formsOf(secret).flatMap((form) => dump.filter((line) => line.includes(form)).map((line) => ({ form, line }))));
  expect(leaks).toEqual([]);
}

const post = (path: string, body: unknown, key?: string) =>
  request(server, 'POST', path, { apiKey: ws.apiKey, body, ...(key !== undefined && { headers: { 'idempotency-key': key } }) });

const endpointBody = (): { url: string; events: ['*']; description: string } => ({
  url: `https://hooks.exemplo.com.br/${randomUUID()}`,
  events: ['*'],
  description: 'CRM',
});

const metaSettings = (): { accessToken: string; appSecret: string; verifyToken: string } => ({
  accessToken: `EAA${randomBytes(24).toString('hex')}`,
  appSecret: randomBytes(16).toString('hex'),
  verifyToken: `verify-${randomBytes(12).toString('hex')}`,
});

const storedResult = (key: string) =>
  server.db
    .selectFrom('idempotency_keys')
    .select(['response', 'response_sealed'])
    .where('workspace_id', '=', ws.workspaceId)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();

/** The key and first answer of the endpoint created with an Idempotency-Key, replayed by later tests. */
let keyed: { key: string; body: ReturnType<typeof endpointBody>; answer: Record<string, unknown> & { secret: string } };

describe('a webhook endpoint secret', () => {
  it('when an endpoint is created without Idempotency-Key, then its secret is in no table, only sealed', async () => {
    const res = await post('/v1/webhook-endpoints', endpointBody());
    secrets.add(res.body.secret);

    expect(res.status).toBe(201);
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const row = await server.db.selectFrom('webhook_endpoints').select('secret').where('id', '=', res.body.id).executeTakeFirstOrThrow();
    expect(row.secret).toMatch(new RegExp(`^v1\\.${keyIdOf(testSecretsKey)}\\.`));
    await expectNoSecretAtRest();
  });

  it('when an endpoint is created with an Idempotency-Key, then the answer stored for replays is sealed and no table holds the secret', async () => {
    const key = randomUUID();
    const body = endpointBody();

    const res = await post('/v1/webhook-endpoints', body, key);
    secrets.add(res.body.secret);
    keyed = { key, body, answer: res.body };

    expect(res.status).toBe(201);
    const stored = await storedResult(key);
    expect(stored.response_sealed).toBe(true);
    expect(stored.response).toMatch(new RegExp(`^v1\\.${keyIdOf(testSecretsKey)}\\.[\\w-]+\\.[\\w-]+\\.[\\w-]+$`));
    await expectNoSecretAtRest();
  });

  it('when that request is replayed, then it answers the first answer, secret included, and still no table holds it', async () => {
    const again = await post('/v1/webhook-endpoints', { ...keyed.body }, keyed.key);

    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(keyed.answer);
    await expectNoSecretAtRest();
  });

  it('when an instance has no SECRETS_KEY, then creating a webhook endpoint is a 503 that says so and stores nothing', async () => {
    const keyless = await startServer({ db: server.db, secrets: null, redisUrl: false });
    try {
      const url = `https://keyless-${randomUUID()}.example.com/hook`;
      const res = await request(keyless, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: { url, events: ['*'] } });

      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({
        code: 'service_unavailable',
        message: 'Webhook endpoints are not available: the operator has not configured SECRETS_KEY.',
        requestId: expect.any(String),
      });
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from webhook_endpoints where url = ${url}`.execute(server.db);
      expect(rows[0]!.n).toBe(0);
    } finally {
      await keyless.close();
    }
  });

  it('when the replay reaches an instance whose keys do not open the stored answer, then it is a 503 that shows no secret', async () => {
    const stranger = await startServer({ db: server.db, secrets: createSecretBox(randomBytes(32)), redisUrl: false });
    try {
      const res = await request(stranger, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: keyed.body, headers: { 'idempotency-key': keyed.key } });

      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.body).toEqual({
        error: {
          code: 'service_unavailable',
          message: `The stored result of this Idempotency-Key holds a secret sealed under key ${keyIdOf(testSecretsKey)}, which this instance cannot open; retry later.`,
          requestId: expect.any(String),
        },
      });
      expect(JSON.stringify(res.body)).not.toContain(keyed.answer.secret);
    } finally {
      await stranger.close();
    }
  });
});

describe("a Meta channel's secrets", () => {
  it('when a Meta channel is created without and with Idempotency-Key, then none of its secrets is in any table', async () => {
    const plain = metaSettings();
    const keyedSettings = metaSettings();
    for (const secret of [...Object.values(plain), ...Object.values(keyedSettings)]) secrets.add(secret);
    const channel = (meta: ReturnType<typeof metaSettings>) => ({
      type: 'whatsapp',
      name: 'WhatsApp Vendas',
      provider: 'meta',
      meta: { externalId: `1065${Date.now()}${randomBytes(2).toString('hex')}`, ...meta },
    });
    const key = randomUUID();
    const keyedBody = channel(keyedSettings);

    const first = await post('/v1/channels', channel(plain));
    const second = await post('/v1/channels', keyedBody, key);
    const replay = await post('/v1/channels', keyedBody, key);

    expect([first.status, second.status, replay.status]).toEqual([201, 201, 201]);
    expect(replay.body).toEqual(second.body);
    // The channel's answer holds no secret: its stored answer is plain JSON, not sealed.
    expect((await storedResult(key)).response_sealed).toBe(false);
    await expectNoSecretAtRest();
  });

  it('when a Meta channel gets new secrets with a PATCH, then none of the old or new ones is in any table', async () => {
    const before = metaSettings();
    const after = metaSettings();
    for (const secret of [...Object.values(before), ...Object.values(after)]) secrets.add(secret);
    const created = await post('/v1/channels', {
      type: 'instagram',
      name: 'Instagram Loja',
      provider: 'meta',
      meta: { externalId: `1784${Date.now()}`, ...before },
    });

    const patched = await request(server, 'PATCH', `/v1/channels/${created.body.id}`, { apiKey: ws.apiKey, body: { meta: after } });
    const verified = await request(
      server,
      'GET',
      `/webhooks/meta/${created.body.id}?hub.mode=subscribe&hub.verify_token=${after.verifyToken}&hub.challenge=1158201444`,
    );

    expect([created.status, patched.status, verified.status]).toEqual([201, 200, 200]);
    await expectNoSecretAtRest();
  });
});

function npmRun(script: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', script], { env: { ...process.env, LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

if (!databaseUrl) console.warn('DATABASE_URL is not set: the secrets:rotate test is SKIPPED (the command opens the database from a process of its own)');

describe.skipIf(!databaseUrl)('npm run secrets:rotate (needs PostgreSQL)', () => {
  it('when the key is rotated, then the stored answer is re-sealed too, a replay with the new key alone answers the secret, and no table holds any secret', async () => {
    const newKey = randomBytes(32);

    const result = await npmRun('secrets:rotate', {
      DATABASE_URL: own!.url,
      SECRETS_KEY: newKey.toString('base64'),
      SECRETS_KEY_PREVIOUS: testSecretsKey.toString('base64'),
    });

    expect(result.code, result.stderr).toBe(0);
    // Three Meta channels, two endpoints and the one stored answer holding a secret.
    expect(JSON.parse(result.stdout)).toEqual({ keyId: keyIdOf(newKey), resealed: 6, remaining: 0 });
    expect((await storedResult(keyed.key)).response).toMatch(new RegExp(`^v1\\.${keyIdOf(newKey)}\\.`));
    const rotated = await startServer({ db: server.db, secrets: createSecretBox(newKey), redisUrl: false });
    try {
      const replay = await request(rotated, 'POST', '/v1/webhook-endpoints', {
        apiKey: ws.apiKey,
        body: keyed.body,
        headers: { 'idempotency-key': keyed.key },
      });

      expect(replay.status).toBe(201);
      expect(replay.body).toEqual(keyed.answer);
    } finally {
      await rotated.close();
    }
    await expectNoSecretAtRest();
  });
});
