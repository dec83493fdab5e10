// The service's configuration: the only reader of process.env, parsed and checked once.
import path from 'node:path';

export type NodeEnv = 'production' | 'development' | 'test';

export interface Config {
  readonly nodeEnv: NodeEnv;
  readonly port: number;
  readonly host: string;
  readonly logLevel: string;
  /** PostgreSQL connection string; when absent the embedded PGlite database is used. */
  readonly databaseUrl: string | undefined;
  readonly databasePoolSize: number;
  /** Directory of the embedded database (only without DATABASE_URL). */
  readonly pgliteDir: string;
  /** Redis connection string; when absent rate limits are counted in process. */
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  readonly rateLimitWindowMs: number;
  /** Failed authentications a client IP may make per window before it gets 429. */
  readonly failedAuthLimit: number;
  /** How long a verified API key is trusted without asking the database again. */
  readonly keyCacheTtlMs: number;
  readonly validateResponses: boolean;
  readonly webConcurrency: number;
  /** Express' `trust proxy`: which proxies may set X-Forwarded-For (the client IP of the failed-auth limit). */
  readonly trustProxy: boolean | number | string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function trustProxy(env: NodeJS.ProcessEnv): boolean | number | string {
  const raw = env.TRUST_PROXY;
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  return /^\d+$/.test(raw) ? Number(raw) : raw;
}

function url(env: NodeJS.ProcessEnv, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return raw;
}

/** Reads the configuration from the environment; throws ConfigError with a clear message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const nodeEnv = (env.NODE_ENV ?? 'development') as NodeEnv;
  if (!['production', 'development', 'test'].includes(nodeEnv)) {
    throw new ConfigError(`NODE_ENV must be production, development or test, got "${nodeEnv}"`);
  }
  const logLevel = env.LOG_LEVEL ?? (nodeEnv === 'test' ? 'silent' : 'info');
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  return Object.freeze({
    nodeEnv,
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '0.0.0.0',
    logLevel,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    pgliteDir: path.resolve(env.PGLITE_DIR || 'data/pglite'),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: env.REDIS_PREFIX || 'sf:',
    rateLimitWindowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 100, 3_600_000),
    failedAuthLimit: integer(env, 'FAILED_AUTH_LIMIT', 30, 1, 1_000_000),
    keyCacheTtlMs: integer(env, 'KEY_CACHE_TTL_MS', 5_000, 0, 60_000),
    validateResponses: boolean(env, 'VALIDATE_RESPONSES', nodeEnv !== 'production'),
    webConcurrency: integer(env, 'WEB_CONCURRENCY', 1, 1, 64),
    trustProxy: trustProxy(env),
  });
}
