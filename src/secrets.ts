// Secrets at rest (channels' Meta secrets, webhook endpoints' secrets, stored answers holding one):
// AES-256-GCM (node:crypto) under SECRETS_KEY. A sealed value names the key that sealed it, so values
// sealed under a previous key (SECRETS_KEY_PREVIOUS) still open after a rotation, `npm run
// secrets:rotate` re-seals them under the current key, and a start with keys that open none of them
// is refused.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { SealedKeyUse, SealedKind } from './db/sealed-keys.js';

const VERSION = 'v1';
const IV_BYTES = 12;
const KEY_BYTES = 32;

export class SecretsError extends Error {}

export interface SecretBox {
  /** The id (a hash prefix) of the key new values are sealed with. */
  readonly keyId: string;
  seal(plain: string): string;
  /** Opens a value sealed under the current or a previous key; throws SecretsError otherwise. */
  open(sealed: string): string;
  /** Whether the value was sealed under another key than the current one. */
  isStale(sealed: string): boolean;
  /** Whether it holds the key of this id (the current or a previous one). */
  hasKey(keyId: string): boolean;
}

/** The id a sealed value carries for its key: 8 hex characters of the key's SHA-256. */
export const keyIdOf = (key: Buffer): string => createHash('sha256').update(key).digest('hex').slice(0, 8);

/**
 * Decodes a key given as base64 of 32 bytes (what `openssl rand -base64 32` prints); throws
 * SecretsError naming `name` when it is anything else.
 */
export function parseKey(text: string, name: string): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || key.length !== KEY_BYTES) {
    throw new SecretsError(`${name} must be the base64 of 32 random bytes (e.g. \`openssl rand -base64 32\`), got ${key.length} bytes`);
  }
  return key;
}

export function createSecretBox(current: Buffer, previous: readonly Buffer[] = []): SecretBox {
  const keys = new Map<string, Buffer>();
  for (const key of [current, ...previous]) keys.set(keyIdOf(key), key);
  const keyId = keyIdOf(current);
  const idOf = (sealed: string): string | undefined => sealed.split('.')[1];
  return {
    keyId,
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [VERSION, keyId, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
    },
    open(sealed) {
      const [version, id, iv, tag, data] = sealed.split('.');
      if (version !== VERSION || !id || iv === undefined || tag === undefined || data === undefined) {
        throw new SecretsError('not a sealed secret');
      }
      const key = keys.get(id);
      if (!key) throw new SecretsError(`sealed under key ${id}, which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS`);
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretsError(`a secret sealed under key ${id} does not open (tampered with, or another key of the same id)`);
      }
    },
    isStale(sealed) {
      return idOf(sealed) !== keyId;
    },
    hasKey(id) {
      return keys.has(id);
    },
  };
}

const KIND_WORDS: Record<SealedKind, [one: string, many: string]> = {
  channel: ['channel secret', 'channel secrets'],
  webhookEndpoint: ['webhook endpoint secret', 'webhook endpoint secrets'],
  idempotencyResult: ['stored Idempotency-Key answer holding a secret', 'stored Idempotency-Key answers holding a secret'],
};

/**
 * Why the service must not start with `box`, or undefined when it opens every sealed value in
 * `uses`: e.g. "3 channel secrets and 1 webhook endpoint secret are sealed under key 1a2b3c4d,
 * which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS". `lacking` ends each key's sentence
 * (", which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS"; ", but SECRETS_KEY is not set").
 */
export function unopenableSecrets(box: SecretBox | undefined, uses: readonly SealedKeyUse[], lacking: string): string | undefined {
  const missing = new Map<string, SealedKeyUse[]>();
  for (const use of uses) {
    if (box?.hasKey(use.keyId)) continue;
    missing.set(use.keyId, [...(missing.get(use.keyId) ?? []), use]);
  }
  if (missing.size === 0) return undefined;
  const sentences = [...missing].map(([keyId, found]) => {
    const parts = found.map(({ kind, count }) => `${count} ${KIND_WORDS[kind][count === 1 ? 0 : 1]}`);
    const verb = found.length === 1 && found[0]!.count === 1 ? 'is' : 'are';
    return `${parts.join(' and ')} ${verb} sealed under key ${keyId}${lacking}`;
  });
  return `${sentences.join('; ')}; start it with the key they were sealed with (as SECRETS_KEY, or in SECRETS_KEY_PREVIOUS while secrets:rotate moves them to a new key)`;
}

/**
 * The embedded default's key: `secrets.key` in the data directory, made (32 random bytes, base64,
 * mode 0600) on first use, so `npm start` needs no configuration.
 */
export function loadOrCreateKeyFile(dataDir: string): Buffer {
  const file = path.join(dataDir, 'secrets.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true });
    // Written aside and linked into place: processes starting together all end up with one key.
    const draft = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(draft, `${randomBytes(KEY_BYTES).toString('base64')}\n`, { mode: 0o600 });
    try {
      fs.linkSync(draft, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.rmSync(draft, { force: true });
    }
  }
  return parseKey(fs.readFileSync(file, 'utf8'), file);
}
