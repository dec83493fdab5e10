// The service as operators run it (`node src/server.ts`) refuses to start with a SECRETS_KEY that
// opens none of the stored sealed values (channels' Meta secrets, webhook endpoint secrets, stored
// answers holding one), naming the missing key and what it seals, instead of starting "ready" and
// answering 500 to every Meta webhook; with the key they were sealed under (here as
// SECRETS_KEY_PREVIOUS, mid-rotation) it starts and opens them.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, keyIdOf, unopenableSecrets } from '../src/secrets.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createWorkspace, request } from './helpers/api.js';
import { createMetaChannel, type MetaChannel } from './helpers/channels.js';
import { freePort, waitFor } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

/** The key every stored secret of this file is sealed under. */
const sealingKey = randomBytes(32);
const otherKey = randomBytes(32);

let own: OwnDatabase | undefined;
let dir: string;
/** Where the service finds the database: a PostgreSQL database of this file's own, else a PGlite directory. */
let databaseEnv: Record<string, string>;
let meta: MetaChannel;
const services: Service[] = [];

/** Opens the file's database (closed before a service opens it: PGlite serves one process). */
function openDb(): Db {
  return createDatabase({ databaseUrl: own?.url, pgliteDir: path.join(dir, 'pglite'), poolSize: 2 });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-secrets-key-'));
  own = databaseUrl ? await ownDatabase() : undefined;
  databaseEnv = own ? { DATABASE_URL: own.url } : { DATABASE_URL: '', PGLITE_DIR: path.join(dir, 'pglite') };
  const db = openDb();
  try {
    await migrateToLatest(db);
    const server = await startServer({ db, secrets: createSecretBox(sealingKey), redisUrl: false, config: { outboundAllowPrivateUrls: true } });
    try {
      const ws = await createWorkspace(server);
      meta = await createMetaChannel(ws, 'whatsapp');
      await createMetaChannel(ws, 'instagram');
      const endpoint = { url: 'https://hooks.exemplo.com.br/crm', events: ['*'] };
      const made = [
        await request(server, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: endpoint }),
        await request(server, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: endpoint, headers: { 'idempotency-key': randomUUID() } }),
      ];
      expect(made.map((r) => r.status)).toEqual([201, 201]);
    } finally {
      await server.close();
    }
  } finally {
    await db.destroy();
  }
}, 60_000);

afterAll(async () => {
  for (const service of services) await service.kill();
  await own?.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

function start(env: Record<string, string>, port: number): Service {
  const service = new Service(port, { ...databaseEnv, REDIS_URL: '', ...env });
  services.push(service);
  return service;
}

/** How the service ended; throws as soon as it listens instead. */
async function exitOf(service: Service): Promise<{ code: number | null; stderr: string }> {
  await waitFor(
    'the service to exit',
    () => {
      if (service.listening().length > 0) throw new Error(`the service started listening: ${service.stderr}`);
      return !service.running;
    },
    START_MS,
  );
  return { code: service.child.exitCode, stderr: service.stderr };
}

const refusal = (keyId: string) =>
  `configuration error: 2 channel secrets and 2 webhook endpoint secrets and 1 stored Idempotency-Key answer holding a secret are sealed under key ${keyId}, ` +
  'which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS; start it with the key they were sealed with';

describe('starting with SECRETS_KEY', () => {
  it(
    'when it opens none of the stored secrets, then the service exits 2 before listening, naming the missing key and what it seals',
    async () => {
      const service = start({ SECRETS_KEY: otherKey.toString('base64') }, await freePort());

      const { code, stderr } = await exitOf(service);

      expect(code).toBe(2);
      expect(stderr).toContain(refusal(keyIdOf(sealingKey)));
    },
    START_MS + 10_000,
  );

  it(
    'when the key they were sealed under is in SECRETS_KEY_PREVIOUS, then it starts, is ready, and opens them',
    async () => {
      const port = await freePort();
      const service = start({ SECRETS_KEY: otherKey.toString('base64'), SECRETS_KEY_PREVIOUS: sealingKey.toString('base64') }, port);
      await service.waitForListening(1);
      const server = { baseUrl: `http://127.0.0.1:${port}` } as TestServer;

      const ready = await request(server, 'GET', '/readyz');
      const verified = await request(
        server,
        'GET',
        `/webhooks/meta/${meta.channel.id}?hub.mode=subscribe&hub.verify_token=${meta.verifyToken}&hub.challenge=1158201444`,
      );

      expect(ready.status).toBe(200);
      expect(verified.status).toBe(200);
      expect(verified.body).toBe(1158201444);
      await service.kill();
    },
    START_MS + 10_000,
  );

  it.skipIf(!databaseUrl)(
    'when workers start (WEB_CONCURRENCY=2) with a key that opens none, then the service exits non-zero, naming the missing key (needs PostgreSQL)',
    async () => {
      const service = start({ SECRETS_KEY: otherKey.toString('base64'), WEB_CONCURRENCY: '2' }, await freePort());

      const { code, stderr } = await exitOf(service);

      expect(code).not.toBe(0);
      expect(stderr).toContain(refusal(keyIdOf(sealingKey)));
    },
    START_MS + 10_000,
  );
});

describe('the refusal', () => {
  const box = createSecretBox(otherKey, [sealingKey]);
  const known = keyIdOf(otherKey);

  it('when every sealed value opens with the keys, then there is none', () => {
    expect(
      unopenableSecrets(
        box,
        [
          { kind: 'channel', keyId: known, count: 3 },
          { kind: 'webhookEndpoint', keyId: keyIdOf(sealingKey), count: 1 },
        ],
        ', which is unknown',
      ),
    ).toBeUndefined();
  });

  it('when several keys are missing, then it names each with what it seals, in one line', () => {
    const uses = [
      { kind: 'channel', keyId: '1a2b3c4d', count: 3 },
      { kind: 'webhookEndpoint', keyId: '1a2b3c4d', count: 1 },
      { kind: 'channel', keyId: known, count: 5 },
      { kind: 'idempotencyResult', keyId: '9f8e7d6c', count: 1 },
    ] as const;

    expect(unopenableSecrets(box, uses, ', which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS')).toBe(
      '3 channel secrets and 1 webhook endpoint secret are sealed under key 1a2b3c4d, which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS; ' +
        '1 stored Idempotency-Key answer holding a secret is sealed under key 9f8e7d6c, which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS; ' +
        'start it with the key they were sealed with (as SECRETS_KEY, or in SECRETS_KEY_PREVIOUS while secrets:rotate moves them to a new key)',
    );
  });

  it('when there is no key at all, then every sealed value is missing its key', () => {
    expect(unopenableSecrets(undefined, [{ kind: 'webhookEndpoint', keyId: known, count: 2 }], ', but SECRETS_KEY is not set')).toMatch(
      /^2 webhook endpoint secrets are sealed under key [0-9a-f]{8}, but SECRETS_KEY is not set; /,
    );
  });
});

if (!databaseUrl) console.warn('DATABASE_URL is not set: the WEB_CONCURRENCY=2 start-up test is SKIPPED (workers serve PostgreSQL only)');
