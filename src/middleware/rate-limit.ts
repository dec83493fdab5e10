// Rate limits (DECISIONS §3.3): per API key and plan in a fixed window, counted in Redis when it is
// configured (one count across every instance) and in process otherwise; and a limit on failed
// authentications per client IP. Both fail open when Redis is down. Created once, at start-up.
import { MemoryStore, rateLimit, type Options, type RateLimitRequestHandler, type Store } from 'express-rate-limit';
import type { Redis } from 'ioredis';
import { RedisStore } from 'rate-limit-redis';
import type { Config } from '../config.js';
import type { Plan } from '../db/schema.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';

export const PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, number> = { free: 60, pro: 300 };

const MAX_BLOCKED_IPS = 10_000;

function createStore(redis: Redis | undefined, prefix: string): Store {
  if (!redis) return new MemoryStore();
  return new RedisStore({
    prefix,
    sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as never,
  });
}

/**
 * The store loads its Lua scripts in init() and keeps a failed load for good, which would leave
 * limits off after Redis was down (or merely still connecting) at start-up. So load them again
 * whenever Redis becomes ready, and retry a load that fails while it is ready.
 */
function keepScriptsLoaded(store: Store, redis: Redis | undefined): void {
  if (!redis || !(store instanceof RedisStore)) return;
  const load = (): void => {
    const increment = store.loadIncrementScript();
    const get = store.loadGetScript();
    store.incrementScriptSha = increment;
    store.getScriptSha = get;
    Promise.all([increment, get]).catch(() => {
      if (redis.status === 'ready') setTimeout(load, 1_000).unref();
    });
  };
  // Whatever init() started: its awaiters see its outcome; it must not become an unhandled rejection.
  store.incrementScriptSha?.catch(() => {});
  store.getScriptSha?.catch(() => {});
  redis.on('ready', load);
  if (redis.status === 'ready') load();
}

const seconds = (ms: number): number => Math.max(0, Math.ceil(ms / 1000));

/** Counts failed authentications per client IP; past the limit the IP gets 429 until the window ends. */
export class FailedAuthLimiter {
  private readonly blockedUntil = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** A 429 while the IP is blocked (checked in process: no Redis round trip on the hot path). */
  check(ip: string): ApiError | undefined {
    const until = this.blockedUntil.get(ip);
    if (until === undefined) return undefined;
    if (until > Date.now()) return this.tooMany(until);
    this.blockedUntil.delete(ip);
    return undefined;
  }

  /** Counts one failure; a 429 when it crosses the limit, undefined otherwise (and on store errors). */
  async recordFailure(ip: string): Promise<ApiError | undefined> {
    let hits;
    try {
      hits = await this.store.increment(ip);
    } catch {
      return undefined;
    }
    if (hits.totalHits <= this.limit) return undefined;
    const until = hits.resetTime?.getTime() ?? Date.now() + this.windowMs;
    if (this.blockedUntil.size >= MAX_BLOCKED_IPS) this.blockedUntil.clear();
    this.blockedUntil.set(ip, until);
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
  keepScriptsLoaded(keyStore, redis);
  keepScriptsLoaded(failedAuthStore, redis);
  const failedAuth = new FailedAuthLimiter(failedAuthStore, config.failedAuthLimit, windowMs);

  return { perKey, failedAuth };
}
