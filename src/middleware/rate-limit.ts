// Rate limits (openapi.yaml's "Rate limits", step 3 of its order of checks): per API key and plan in
// a fixed window, counted in Redis when it is configured (one count across every instance) and in
// process otherwise; and a limit on failed authentications per client IP. Both fail open when Redis
// is down. Created once, at start-up.
import { createHash } from 'node:crypto';
import { ipKeyGenerator, MemoryStore, rateLimit, type AugmentedRequest, type Options, type RateLimitRequestHandler, type Store } from 'express-rate-limit';
import type { Redis } from 'ioredis';
import { RedisStore } from 'rate-limit-redis';
import type { Config } from '../config.js';
import type { Plan } from '../db/schema.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';

export const PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, number> = { free: 60, pro: 300 };

const MAX_BLOCKED_IPS = 10_000;
/** An IPv6 client is counted by its /56, as express-rate-limit does: one host holds a whole /64 or more. */
const IPV6_SUBNET = 56;

/**
 * Runs the store's Lua scripts with no script-loading state that can get stuck. rate-limit-redis
 * sends SCRIPT LOAD in init() and awaits that outcome on every request: a load that failed (Redis
 * down or still connecting) or merely timed out (the event loop busy building the app right after
 * the load was sent) makes every request fail open until something loads the scripts again. So
 * SCRIPT LOAD is answered here with the script's SHA1 (what Redis would answer), EVALSHA runs it in
 * one round trip, and a Redis that does not know the script (new, restarted, flushed) gets it once
 * through EVAL.
 */
function redisCommands(redis: Redis): (command: string, ...args: string[]) => Promise<unknown> {
  const scripts = new Map<string, string>();
  return async (command, ...args) => {
    const name = command.toUpperCase();
    if (name === 'SCRIPT' && args[0]?.toUpperCase() === 'LOAD' && args[1] !== undefined) {
      const sha = createHash('sha1').update(args[1]).digest('hex');
      scripts.set(sha, args[1]);
      return sha;
    }
    if (name === 'EVALSHA' && args[0] !== undefined && scripts.has(args[0])) {
      try {
        return await redis.call(command, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return redis.call('EVAL', scripts.get(args[0])!, ...args.slice(1));
      }
    }
    return redis.call(command, ...args);
  };
}

function createStore(redis: Redis | undefined, prefix: string): Store {
  if (!redis) return new MemoryStore();
  return new RedisStore({ prefix, sendCommand: redisCommands(redis) as never });
}

const seconds = (ms: number): number => Math.max(0, Math.ceil(ms / 1000));

/**
 * Counts failed authentications per client IP; past the limit the IP's failures get 429 until the
 * window ends (its requests with a valid key never reach here).
 */
export class FailedAuthLimiter {
  private readonly blockedUntil = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** A 429 while the IP is blocked (checked in process: no Redis round trip on the hot path). */
  check(ip: string): ApiError | undefined {
    const client = ipKeyGenerator(ip, IPV6_SUBNET);
    const until = this.blockedUntil.get(client);
    if (until === undefined) return undefined;
    if (until > Date.now()) return this.tooMany(until);
    this.blockedUntil.delete(client);
    return undefined;
  }

  /**
   * Counts one failure; a 429 when it crosses the limit, undefined otherwise (and on store errors).
   * The failure that crosses it is logged, once per window across every instance sharing the count.
   */
  async recordFailure(ip: string, log: Logger): Promise<ApiError | undefined> {
    const client = ipKeyGenerator(ip, IPV6_SUBNET);
    let hits;
    try {
      hits = await this.store.increment(client);
    } catch {
      return undefined;
    }
    if (hits.totalHits <= this.limit) return undefined;
    const until = hits.resetTime?.getTime() ?? Date.now() + this.windowMs;
    if (hits.totalHits === this.limit + 1) {
      log.warn(
        { ip, client, failures: hits.totalHits, retryAfterSeconds: seconds(until - Date.now()) },
        'client throttled: too many failed authentications; its failures get 429 until the window ends',
      );
    }
    if (this.blockedUntil.size >= MAX_BLOCKED_IPS) this.blockedUntil.clear();
    this.blockedUntil.set(client, until);
    return this.tooMany(until);
  }

  private tooMany(until: number): ApiError {
    const retry = String(seconds(until - Date.now()));
    return new ApiError(429, 'rate_limited', `Too many failed authentications from this client; retry in ${retry} seconds.`, undefined, {
      'Retry-After': retry,
    });
  }
}

export interface RateLimits {
  perKey: RateLimitRequestHandler;
  failedAuth: FailedAuthLimiter;
}

export function createRateLimits({ config, redis, logger }: { config: Config; redis: Redis | undefined; logger: Logger }): RateLimits {
  if (!redis) logger.warn('REDIS_URL is not set: rate limits are counted per process, not shared between instances');
  const windowMs = config.rateLimitWindowMs;
  const keyStore = createStore(redis, `${config.redisPrefix}rl:key:`);

  const perKey = rateLimit({
    windowMs,
    limit: (req) => PLAN_LIMITS[req.auth!.plan as keyof typeof PLAN_LIMITS] ?? 0,
    skip: (req) => req.auth!.plan === 'enterprise',
    keyGenerator: (req) => req.auth!.keyId,
    standardHeaders: 'draft-6',
    legacyHeaders: false,
    passOnStoreError: true,
    store: keyStore,
    logger: {
      error: (err: unknown, message?: string) => logger.debug({ err }, message),
      warn: (err: unknown, message?: string) => logger.warn({ err }, message),
    },
    handler: (req, res, next, options: Options) => {
      const limit = PLAN_LIMITS[req.auth!.plan as keyof typeof PLAN_LIMITS];
      const retry = res.getHeader('Retry-After') ?? seconds(windowMs);
      // The first refused request of the window (one per key across instances sharing the count).
      if ((req as AugmentedRequest).rateLimit?.used === limit + 1) {
        const { keyId, workspaceId, plan } = req.auth!;
        req.log.warn({ keyId, workspaceId, plan, limit, retryAfterSeconds: Number(retry) }, 'API key reached its plan limit for this window');
      }
      next(
        new ApiError(
          options.statusCode,
          'rate_limited',
          `Rate limit of ${limit} requests per ${seconds(windowMs)} seconds exceeded; retry in ${retry} seconds.`,
        ),
      );
    },
  });

  const failedAuthStore = createStore(redis, `${config.redisPrefix}rl:authfail:`);
  Promise.resolve(failedAuthStore.init?.({ windowMs } as Options)).catch(() => {});
  const failedAuth = new FailedAuthLimiter(failedAuthStore, config.failedAuthLimit, windowMs);

  return { perKey, failedAuth };
}
