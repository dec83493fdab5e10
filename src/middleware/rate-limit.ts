// Rate limits (openapi.yaml's "Rate limits", step 3 of its order of checks): per API key and plan in
// a fixed window, counted in Redis when it is configured (one count across every instance) and in
// process otherwise; and limits on failed authentications per client IP (API keys; Meta's webhook
// signatures and verify tokens, per channel). All fail open when Redis is down. Created once, at
// start-up.
import { createHash } from 'node:crypto';
import { ipKeyGenerator, MemoryStore, rateLimit, type AugmentedRequest, type Options, type RateLimitRequestHandler, type Store } from 'express-rate-limit';
import type { Redis } from 'ioredis';
import { RedisStore } from 'rate-limit-redis';
import type { Config } from '../config.js';
import type { Plan } from '../db/schema.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';

export const PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, number> = { free: 60, pro: 300 };

const MAX_BLOCKED_CLIENTS = 10_000;
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

/** What a FailedAuthLimiter says in its log line when a client crosses the limit. */
export interface ThrottleWarning {
  message: string;
  /** The log field that names the scope, for a limiter that counts per client and scope. */
  scopeField?: string;
}

/**
 * Counts failed authentications per client IP (and per scope, such as a webhook's channel, when the
 * caller gives one); past the limit the client gets 429 until the window ends. Only failures count.
 */
export class FailedAuthLimiter {
  private readonly blockedUntil = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly warning: ThrottleWarning = {
      message: 'client throttled: too many failed authentications; its failures get 429 until the window ends',
    },
  ) {}

  /** A 429 while the client is blocked (checked in process: no Redis round trip on the hot path). */
  check(ip: string, scope?: string): ApiError | undefined {
    const key = this.keyOf(ip, scope);
    const until = this.blockedUntil.get(key);
    if (until === undefined) return undefined;
    if (until > Date.now()) return this.tooMany(until);
    this.blockedUntil.delete(key);
    return undefined;
  }

  /**
   * For callers that must refuse before they can tell whether the attempt fails (a webhook, whose
   * signature covers a body not read yet): a 429 once the client has used up its failures in the
   * window, counted by any instance. Unless this process already refuses the client, it looks at
   * the count (with Redis one round trip; a store error lets the request through). Each process
   * that starts refusing a client logs it once, on `logs.log` (read only then: a request's logger
   * is made on first use).
   */
  async checkBeforeAttempt(ip: string, logs: { readonly log: Logger }, scope?: string): Promise<ApiError | undefined> {
    const blocked = this.check(ip, scope);
    if (blocked) return blocked;
    const key = this.keyOf(ip, scope);
    let hits;
    try {
      hits = await this.store.get?.(key);
    } catch {
      return undefined;
    }
    const until = hits?.resetTime?.getTime();
    if (!hits || hits.totalHits < this.limit || until === undefined || until <= Date.now()) return undefined;
    this.warn(logs.log, ip, scope, hits.totalHits, until);
    this.block(key, until);
    return this.tooMany(until);
  }

  /**
   * Counts one failure; a 429 when it crosses the limit, undefined otherwise (and on store errors).
   * The failure that crosses it is logged, once per window across every instance sharing the count.
   */
  async recordFailure(ip: string, log: Logger, scope?: string): Promise<ApiError | undefined> {
    const key = this.keyOf(ip, scope);
    let hits;
    try {
      hits = await this.store.increment(key);
    } catch {
      return undefined;
    }
    if (hits.totalHits <= this.limit) return undefined;
    const until = hits.resetTime?.getTime() ?? Date.now() + this.windowMs;
    if (hits.totalHits === this.limit + 1) this.warn(log, ip, scope, hits.totalHits, until);
    this.block(key, until);
    return this.tooMany(until);
  }

  private warn(log: Logger, ip: string, scope: string | undefined, failures: number, until: number): void {
    const { message, scopeField } = this.warning;
    const client = ipKeyGenerator(ip, IPV6_SUBNET);
    const scoped = scopeField && scope !== undefined ? { [scopeField]: scope } : {};
    log.warn({ ip, client, ...scoped, failures, retryAfterSeconds: seconds(until - Date.now()) }, message);
  }

  private keyOf(ip: string, scope: string | undefined): string {
    const client = ipKeyGenerator(ip, IPV6_SUBNET);
    return scope === undefined ? client : `${client}|${scope}`;
  }

  private block(key: string, until: number): void {
    if (this.blockedUntil.size >= MAX_BLOCKED_CLIENTS) this.blockedUntil.clear();
    this.blockedUntil.set(key, until);
  }

  private tooMany(until: number): ApiError {
    const retry = String(seconds(until - Date.now()));
    return new ApiError(429, 'rate_limited', `Too many failed authentications from this client; retry in ${String(retry)} seconds.`, undefined, {
      'Retry-After': retry,
    });
  }
}

export interface RateLimits {
  perKey: RateLimitRequestHandler;
  /** Failed API-key authentications per client IP. */
  failedAuth: FailedAuthLimiter;
  /** Bad signatures and verify tokens on Meta's webhooks, per client IP and channel (a count of its own). */
  webhookAuth: FailedAuthLimiter;
}

function failedAuthLimiter(redis: Redis | undefined, prefix: string, config: Config, warning?: ThrottleWarning): FailedAuthLimiter {
  const windowMs = config.rateLimitWindowMs;
  const store = createStore(redis, prefix);
  Promise.resolve(store.init?.({ windowMs } as Options)).catch(() => {});
  return new FailedAuthLimiter(store, config.failedAuthLimit, windowMs, warning);
}

export function createRateLimits({ config, redis, logger }: { config: Config; redis: Redis | undefined; logger: Logger }): RateLimits {
  // The embedded database serves one process, whose own count is the documented default; on
  // PostgreSQL, instances are likely several, and each would count a key's requests apart.
  if (!redis && config.databaseUrl) logger.warn('REDIS_URL is not set: rate limits are counted per process, not shared between instances');
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
          `Rate limit of ${limit} requests per ${seconds(windowMs)} seconds exceeded; retry in ${String(retry)} seconds.`,
        ),
      );
    },
  });

  const failedAuth = failedAuthLimiter(redis, `${config.redisPrefix}rl:authfail:`, config);
  // Counted per channel as well as per address: Meta delivers every app's webhooks from the same
  // addresses, so one channel with a wrong app secret must not get Meta refused for the others.
  const webhookAuth = failedAuthLimiter(redis, `${config.redisPrefix}rl:webhookfail:`, config, {
    message: "client throttled: too many bad signatures or verify tokens on a channel's webhook; its requests to it get 429 until the window ends",
    scopeField: 'channelId',
  });

  return { perKey, failedAuth, webhookAuth };
}
