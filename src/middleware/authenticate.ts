// Authentication (step 2 of openapi.yaml's "Order of checks"): `Authorization: Bearer sfk_...`, the scheme case-insensitive,
// or without that header another credential the app allows (GET /events/stream's `?token=`, src/stream/tokens.ts).
// Verified keys are trusted for a few seconds in process, so revocation takes effect within that TTL.
import type { Request, RequestHandler } from 'express';
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
  // The challenge RFC 9110 §11.6.1 asks of a 401: a bearer token (RFC 6750).
  return new ApiError(401, 'unauthorized', 'Missing or invalid API key.', undefined, { 'WWW-Authenticate': 'Bearer' });
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

/**
 * Sets req.auth from a valid key. Only failures are throttled: a client (IP) past its failed-attempt
 * limit gets 429 instead of 401 for its further failures, but a valid key is always served, whatever
 * other keys from the same address did (keys of ~256 bits are not guessed).
 */
export function authenticate(deps: {
  db: Db;
  keyCacheTtlMs: number;
  failedAuth: FailedAuthLimiter;
  /** A credential other than the header, for requests that allow one (a stream token); undefined when none. */
  otherCredential?: (req: Request) => Promise<ActiveKey | undefined>;
}): RequestHandler {
  const cache = new KeyCache(deps.keyCacheTtlMs);

  const verify = async (key: string | undefined): Promise<AuthContext | undefined> => {
    if (!key || !API_KEY_PATTERN.test(key)) return undefined;
    const hash = hashApiKey(key);
    const cached = cache.get(hash);
    if (cached) return cached;
    const found = await findActiveKey(deps.db, hash);
    if (!found) return undefined;
    const auth = { ...found, scopeSet: new Set(found.scopes) };
    cache.set(hash, auth);
    return auth;
  };

  return async (req, _res, next) => {
    const other = req.get('authorization') === undefined ? await deps.otherCredential?.(req) : undefined;
    const auth = other ? { ...other, scopeSet: new Set(other.scopes) } : await verify(BEARER.exec(req.get('authorization') ?? '')?.[1]);
    if (auth) {
      req.auth = auth;
      return next();
    }
    const ip = req.ip ?? 'unknown';
    next(deps.failedAuth.check(ip) ?? (await deps.failedAuth.recordFailure(ip, req.log)) ?? unauthorized());
  };
}

/** The scope check (step 4 of the order of checks): 403 naming the scope the key lacks. */
export const requireScope: RequestHandler = (req, _res, next) => {
  const missing = req.operation!.scopes.filter((scope) => !req.auth!.scopeSet.has(scope));
  if (missing.length === 0) return next();
  next(new ApiError(403, 'forbidden', `This API key lacks the scope ${missing.join(', ')}.`));
};
