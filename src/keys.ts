// API keys: `sfk_` + 43 random base62 characters (~256 bits); only their SHA-256 is stored.
import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 43;
const PREFIX_LENGTH = 12;

export const API_KEY_PATTERN = /^sfk_[0-9A-Za-z]{32,128}$/;

export interface NewApiKey {
  key: string;
  hash: string;
  prefix: string;
}

/** Uniform base62 characters by rejection sampling (bytes >= 248 would bias the alphabet). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateApiKey(): NewApiKey {
  const key = `sfk_${randomBase62(RANDOM_LENGTH)}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, PREFIX_LENGTH) };
}
