// Authentication (DECISIONS §3.2): `Authorization: Bearer sfk_...`, the scheme case-insensitive.
// Verified keys are trusted for a few seconds in process, so revocation takes effect within that TTL.
import type { RequestHandler } from 'express';
import { findActiveKey, type ActiveKey } from '../db/api-keys.js';
import type { Db } from '../db/database.js';
import { ApiError } from '../errors.js';
import { API_KEY_PATTERN, hashApiKey } from '../keys.js';
import type { FailedAuthLimiter } from './rate-limit.js';

export interface AuthContext extends ActiveKey {
  scopeSet: ReadonlySet<string>;
}

const BEARER = /^bearer +(\S+)$/i;
const MAX_CACHED_KEYS = 10_000;

function unauthorized(): ApiError {
  return new ApiError(401, 'unauthorized', 'Missing or invalid API key.');
}

/** Cache of verified keys by hash; negative answers are never cached. */
class KeyCache {
  private readonly entries = new Map<string, { auth: AuthContext; expires: number }>();
  constructor(private readonly ttlMs: number) {}

  get(hash: string): AuthContext | undefined {
    const hit = this.entries.get(hash);
    if (!hit) return undefined;
    if (hit.expires > Date.now()) return hit.auth;
    this.entries.delete(hash);
    return undefined;
  }

  set(hash: string, auth: AuthContext): void {
    if (this.ttlMs <= 0) return;
    if (this.entries.size >= MAX_CACHED_KEYS) this.entries.clear();
    this.entries.set(hash, { auth, expires: Date.now() + this.ttlMs });
  }
}

export function authenticate(deps: { db: Db; keyCacheTtlMs: number; failedAuth: FailedAuthLimiter }): RequestHandler {
  const cache = new KeyCache(deps.keyCacheTtlMs);

  const fail = async (ip: string): Promise<ApiError> => (await deps.failedAuth.recordFailure(ip)) ?? unauthorized();

  return async (req, _res, next) => {
    const ip = req.ip ?? 'unknown';
    const blocked = deps.failedAuth.check(ip);
    if (blocked) return next(blocked);

    const match = BEARER.exec(req.get('authorization') ?? '');
    const key = match?.[1];
    if (!key || !API_KEY_PATTERN.test(key)) return next(await fail(ip));

    const hash = hashApiKey(key);
    let auth = cache.get(hash);
    if (!auth) {
      const found = await findActiveKey(deps.db, hash);
      if (!found) return next(await fail(ip));
      auth = { ...found, scopeSet: new Set(found.scopes) };
      cache.set(hash, auth);
    }
    req.auth = auth;
    next();
  };
}

/** The scope check (DECISIONS §3.4): 403 naming the scope the key lacks. */
export const requireScope: RequestHandler = (req, _res, next) => {
  const missing = req.operation!.scopes.filter((scope) => !req.auth!.scopeSet.has(scope));
  if (missing.length === 0) return next();
  next(new ApiError(403, 'forbidden', `This API key lacks the scope ${missing.join(', ')}.`));
};
