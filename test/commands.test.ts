// The operator commands: `npm run --silent provision` and `npm run --silent revoke` print exactly
// one JSON object on stdout, and what they make (or revoke) is what the API then honours. They need
// DATABASE_URL: on the embedded database they refuse, exit 2, and write nothing.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../src/db/database.js';
import { SCOPES } from '../src/provisioning.js';
import { request } from './helpers/api.js';
import { databaseUrl, startServer, type TestServer } from './helpers/server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-commands-'));
const env = { LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl ?? '' };

if (!databaseUrl) console.warn('DATABASE_URL is not set: the provision and revoke tests that need PostgreSQL are SKIPPED');

function npmRun(script: string, args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', script, '--', ...args], {
      env: { ...process.env, ...env, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The one JSON object a command printed: stdout must hold nothing else. */
function onlyJson(stdout: string): any {
  const lines = stdout.split('\n').filter((line) => line !== '');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

async function withServer<T>(use: (server: TestServer) => Promise<T>, keyCacheTtlMs = 0): Promise<T> {
  const db: Db = createDatabase({ databaseUrl, pgliteDir: 'memory://' });
  const server = await startServer({ db, redisUrl: false, config: { keyCacheTtlMs } });
  try {
    return await use(server);
  } finally {
    await server.close();
    await db.destroy();
  }
}

afterAll(() => {
  fs.rmSync(scratch, { recursive: true, force: true });
});

describe('without DATABASE_URL (the embedded database)', () => {
  it.each([
    ['provision', ['--plan', 'free', '--scopes', 'all']],
    ['revoke', ['--key-id', '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b']],
  ])('when npm run %s is run, then it refuses with exit code 2, says why, and writes nothing', async (script, args) => {
    const dataDir = path.join(scratch, `${script}-data`);

    const result = await npmRun(script, args, { DATABASE_URL: '', PGLITE_DIR: path.join(dataDir, 'pglite') });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(new RegExp(`^error: ${script} needs DATABASE_URL \\(PostgreSQL\\)`));
    expect(result.stderr).toContain('demo key');
    expect(fs.existsSync(dataDir)).toBe(false);
  });
});

describe.skipIf(!databaseUrl)('npm run provision (needs PostgreSQL)', () => {
  let provisioned: any;
  beforeAll(async () => {
    const result = await npmRun('provision', ['--plan', 'free', '--scopes', 'agents:read,contacts:read']);
    expect(result.code, result.stderr).toBe(0);
    provisioned = onlyJson(result.stdout);
  });

  it('when it makes a workspace, then it prints the workspace, the key and two channels', () => {
    expect(provisioned).toEqual({
      workspaceId: expect.stringMatching(UUID),
      keyId: expect.stringMatching(UUID),
      apiKey: expect.stringMatching(/^sfk_[0-9A-Za-z]{32,}$/),
      plan: 'free',
      scopes: ['agents:read', 'contacts:read'],
      channels: [
        { id: expect.stringMatching(UUID), type: 'whatsapp', name: 'WhatsApp' },
        { id: expect.stringMatching(UUID), type: 'instagram', name: 'Instagram' },
      ],
    });
  });

  it('when given --workspace and all scopes, then the new key joins that workspace', async () => {
    const result = await npmRun('provision', ['--plan', 'enterprise', '--scopes', 'all', '--workspace', provisioned.workspaceId]);

    expect(result.code, result.stderr).toBe(0);
    const second = onlyJson(result.stdout);
    expect(second).toMatchObject({ workspaceId: provisioned.workspaceId, plan: 'enterprise', channels: provisioned.channels });
    expect(second.scopes).toEqual(SCOPES);
    expect(second.keyId).not.toBe(provisioned.keyId);
  });

  it('when the key is used, then it works with exactly its scopes, and only its hash is stored', async () => {
    await withServer(async (server) => {
      const agents = await request(server, 'GET', '/v1/agents', { apiKey: provisioned.apiKey });
      const threads = await request(server, 'GET', '/v1/threads', { apiKey: provisioned.apiKey });
      const channels = await request(server, 'GET', '/v1/channels', { apiKey: provisioned.apiKey });
      const stored = await server.db.selectFrom('api_keys').selectAll().where('id', '=', provisioned.keyId).executeTakeFirstOrThrow();

      expect(agents.status).toBe(200);
      expect(threads.status).toBe(403);
      expect(channels.status).toBe(403);
      expect(stored.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(stored.prefix).toBe(provisioned.apiKey.slice(0, 12));
      expect(JSON.stringify(stored)).not.toContain(provisioned.apiKey);
    });
  });

  it.each([
    [['--plan', 'gold', '--scopes', 'all'], /--plan/],
    [['--plan', 'free'], /--scopes/],
    [['--plan', 'free', '--scopes', 'agents:read,agents:delete'], /unknown scope agents:delete/],
    [['--plan', 'free', '--scopes', 'all', '--workspace', 'nope'], /UUID/],
    [['--plan', 'free', '--scopes', 'all', '--workspace', '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b'], /does not exist/],
    [['--plan', 'free', '--scopes', 'all', '--colour', 'blue'], /colour/],
  ])('when the arguments are %j, then it exits 2 with a message and prints nothing on stdout', async (args, message) => {
    const result = await npmRun('provision', args);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });
});

describe.skipIf(!databaseUrl)('npm run revoke (needs PostgreSQL)', () => {
  it('when a key is revoked, then it prints the revocation and the key answers 401', async () => {
    const made = onlyJson((await npmRun('provision', ['--plan', 'pro', '--scopes', 'all'])).stdout);

    const result = await npmRun('revoke', ['--key-id', made.keyId]);

    expect(result.code, result.stderr).toBe(0);
    expect(onlyJson(result.stdout)).toEqual({
      keyId: made.keyId,
      workspaceId: made.workspaceId,
      revokedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    });
    await withServer(async (server) => {
      const response = await request(server, 'GET', '/v1/agents', { apiKey: made.apiKey });
      expect(response.status).toBe(401);
    });
  });

  it('when a running instance trusts the key from its cache, then the command returns only once the cache has let it go', async () => {
    const made = onlyJson((await npmRun('provision', ['--plan', 'pro', '--scopes', 'all'])).stdout);
    const ttl = 1_500;

    await withServer(async (server) => {
      const before = await request(server, 'GET', '/v1/agents', { apiKey: made.apiKey });
      const started = Date.now();
      const result = await npmRun('revoke', ['--key-id', made.keyId], { KEY_CACHE_TTL_MS: String(ttl) });
      const after = await request(server, 'GET', '/v1/agents', { apiKey: made.apiKey });

      expect(before.status).toBe(200);
      expect(result.code, result.stderr).toBe(0);
      expect(Date.now() - started).toBeGreaterThanOrEqual(ttl);
      expect(after.status).toBe(401);
    }, ttl);
  });

  it('when the key id is unknown or malformed, then it exits 2 and prints nothing on stdout', async () => {
    const unknown = await npmRun('revoke', ['--key-id', '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b']);
    const malformed = await npmRun('revoke', ['--key-id', 'x']);

    for (const result of [unknown, malformed]) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
    }
    expect(unknown.stderr).toMatch(/no key with id/);
  });
});
