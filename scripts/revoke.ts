// npm run --silent revoke -- --key-id <uuid>: the key answers 401 from then on. Running instances
// trust a verified key for KEY_CACHE_TTL_MS (default 5 s): the command returns once that much time
// has passed since the revocation, so no instance with that setting still accepts the key. Prints
// {keyId, workspaceId, revokedAt}.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.js';
import { revokeApiKey } from '../src/db/api-keys.js';
import { runCommand, UsageError } from './cli.js';

const USAGE = 'usage: npm run --silent revoke -- --key-id <uuid>';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

await runCommand(
  async (db) => {
    let values;
    try {
      ({ values } = parseArgs({ options: { 'key-id': { type: 'string' } }, strict: true }));
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\n${USAGE}`);
    }
    const keyId = values['key-id'];
    if (!keyId || !UUID.test(keyId)) throw new UsageError(`--key-id must be a key's UUID\n${USAGE}`);
    const revoked = await revokeApiKey(db, keyId.toLowerCase());
    if (!revoked) throw new UsageError(`no key with id ${keyId}`);
    // Every instance's cache has let the key go by then (the earliest revocation counts: a key revoked before is long gone).
    await sleep(Math.max(0, revoked.revokedAt.getTime() + loadConfig().keyCacheTtlMs - Date.now()));
    return { keyId: keyId.toLowerCase(), workspaceId: revoked.workspaceId, revokedAt: revoked.revokedAt.toISOString() };
  },
  { needsDatabaseUrl: 'revoke' },
);
