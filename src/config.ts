// The service's configuration: the only reader of process.env, parsed and checked once.
import path from 'node:path';
import { parseKey, SecretsError } from './secrets.js';

export type NodeEnv = 'production' | 'development' | 'test';

export interface Config {
  readonly nodeEnv: NodeEnv;
  readonly port: number;
  readonly host: string;
  readonly logLevel: string;
  /** PostgreSQL connection string; when absent the embedded PGlite database is used. */
  readonly databaseUrl: string | undefined;
  readonly databasePoolSize: number;
  /** How long a request may wait for a pooled connection (or a new one) before it is answered 503. */
  readonly databasePoolWaitMs: number;
  /** PostgreSQL's statement_timeout for every query of the service (0: none). */
  readonly databaseStatementTimeoutMs: number;
  /** Parameterised queries run as named prepared statements; false behind a pooler in transaction mode. */
  readonly databasePreparedStatements: boolean;
  /**
   * A session of PostgreSQL's own (directly, or through a pooler in session mode) for what a
   * transaction pooler cannot carry: the migrations' advisory lock and the job workers' LISTEN.
   * Unset: DATABASE_URL.
   */
  readonly databaseDirectUrl: string | undefined;
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
  /** Time a client has to send a request's headers. */
  readonly headersTimeoutMs: number;
  /** Time a client has to send a whole request, headers and body. */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  readonly keepAliveTimeoutMs: number;
  /** Open connections per process for requests; past it new connections are closed at once. Event streams come on top. */
  readonly maxConnections: number;
  /** Event streams one API key (or its stream tokens) may hold open at once on one instance; one more is 429 too_many_streams. */
  readonly streamsPerKey: number;
  /** How long a stopping process waits for in-flight requests and background work. */
  readonly shutdownTimeoutMs: number;
  /** The key channel secrets are sealed with (SECRETS_KEY); the embedded default makes one under ./data. */
  readonly secretsKey: Buffer | undefined;
  /** Keys of earlier rotations, still accepted to open secrets (SECRETS_KEY_PREVIOUS). */
  readonly secretsKeyPrevious: readonly Buffer[];
  /** Meta's Graph API base, without a trailing slash (META_GRAPH_URL). */
  readonly metaGraphUrl: string;
  /** How long one Graph request may take before it counts as a passing failure. */
  readonly metaGraphTimeoutMs: number;
  /**
   * The first retry's delay of a passing failure (a Graph delivery, a file fetch or erasure, an AI
   * call, an automation run); each next one doubles, up to 10 minutes, with jitter (RETRY_BASE_MS).
   */
  readonly retryBaseMs: number;
  /** Attempts of one such job before it is given up: the message or file failed, the thread handed off (RETRY_MAX_ATTEMPTS). */
  readonly retryMaxAttempts: number;
  /** Deliveries one process runs at once. */
  readonly deliveryConcurrency: number;
  /**
   * How long a claim holds a job unless renewed: its worker renews it every third of that while the
   * job runs, so it bounds how long a dead process's jobs wait for another instance, not how long a
   * job may take.
   */
  readonly jobLeaseMs: number;
  /** How often an idle worker looks for due jobs when no notification woke it. */
  readonly jobPollMs: number;
  /** An OpenAI-compatible Chat Completions API, without a trailing slash (AI_BASE_URL); unset, agents never answer. */
  readonly aiBaseUrl: string | undefined;
  /** Sent as `Authorization: Bearer` to the AI API (AI_API_KEY); never logged. */
  readonly aiApiKey: string | undefined;
  /** How long one AI call may take before it counts as a failed attempt. */
  readonly aiTimeoutMs: number;
  /** How long an agent waits after a customer's message before answering, so a burst gets one answer. */
  readonly aiReplyDelayMs: number;
  /** AI calls one process makes at once. */
  readonly aiConcurrency: number;
  /** Automation jobs of each kind (an event's automations, a thread.idle timer) one process runs at once. */
  readonly automationConcurrency: number;
  /**
   * Whether a customer's message runs its automations in its own transaction (AUTOMATIONS_INLINE,
   * default true: automations/inline.ts); false queues each run as a job, as every other trigger's.
   */
  readonly automationsInline: boolean;
  /** The waits (ms) after the 1st, 2nd, ... failed webhook attempt (WEBHOOK_RETRY_DELAYS, in seconds); then the delivery is failed. */
  readonly webhookRetryDelaysMs: readonly number[];
  /**
   * Whether the URLs the service calls that others chose (webhook endpoints, Instagram's attachment
   * URLs) may be http:// or reach private addresses (OUTBOUND_ALLOW_PRIVATE_URLS; default only on
   * the embedded database).
   */
  readonly outboundAllowPrivateUrls: boolean;
  /** Webhook attempts one process makes at once. */
  readonly webhookConcurrency: number;
  /** Webhook attempts to one endpoint one process makes at once: a slow endpoint holds no more slots. */
  readonly webhookEndpointConcurrency: number;
  /** Where media files' bytes are kept (MEDIA_STORE, with S3_ENDPOINT and AWS_* for a bucket). */
  readonly mediaStore: MediaStoreConfig;
  /** How long one attempt to download an inbound file may take in all (MEDIA_FETCH_TIMEOUT_MS), however its bytes trickle. */
  readonly mediaFetchTimeoutMs: number;
  /** Whether the service keeps metrics and serves GET /metrics (METRICS_ENABLED). */
  readonly metricsEnabled: boolean;
  /** The Bearer token GET /metrics asks for (METRICS_TOKEN); unset, it asks for none. */
  readonly metricsToken: string | undefined;
  /** A port of its own for GET /metrics (METRICS_PORT), off the public one; unset, /metrics is on PORT. */
  readonly metricsPort: number | undefined;
}

/** A directory (`file:<dir>`) or an S3 bucket (`s3://bucket[/prefix]`) for media files' bytes. */
export type MediaStoreConfig =
  | { readonly kind: 'file'; readonly dir: string }
  | {
      readonly kind: 's3';
      readonly bucket: string;
      /** Prepended to every key, without a trailing slash ('' for none). */
      readonly prefix: string;
      /** An S3-compatible server's URL (S3_ENDPOINT); unset: AWS. Path-style addressing then. */
      readonly endpoint: string | undefined;
      readonly region: string;
      readonly accessKeyId: string | undefined;
      readonly secretAccessKey: string | undefined;
    };

function mediaStore(env: NodeJS.ProcessEnv): MediaStoreConfig {
  const raw = env.MEDIA_STORE || 'file:./data/media';
  if (raw.startsWith('file:')) {
    const dir = raw.slice('file:'.length);
    if (dir === '') throw new ConfigError('MEDIA_STORE file: needs a directory, e.g. file:./data/media');
    return Object.freeze({ kind: 'file', dir: path.resolve(dir) });
  }
  const s3 = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(raw);
  if (!s3) throw new ConfigError(`MEDIA_STORE must be file:<dir> or s3://bucket[/prefix], got "${raw}"`);
  const accessKeyId = env.AWS_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY || undefined;
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) throw new ConfigError('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together');
  return Object.freeze({
    kind: 's3',
    bucket: s3[1]!,
    prefix: (s3[2] ?? '').replace(/^\/+|\/+$/g, ''),
    endpoint: url(env, 'S3_ENDPOINT', ['https:', 'http:']),
    region: env.AWS_REGION || 'us-east-1',
    accessKeyId,
    secretAccessKey,
  });
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {}

/**
 * Settings renamed once they served more than their first user, each with the name it had first:
 * DELIVERY_* drove Meta deliveries only, WEBHOOK_ALLOW_PRIVATE_URLS webhook endpoints only. The first
 * name is still read, and means the same, when the new one is unset or empty (deployments set it);
 * when both are set the new one wins.
 */
export const FIRST_NAMES: Readonly<Record<string, string>> = Object.freeze({
  RETRY_BASE_MS: 'DELIVERY_RETRY_BASE_MS',
  RETRY_MAX_ATTEMPTS: 'DELIVERY_MAX_ATTEMPTS',
  OUTBOUND_ALLOW_PRIVATE_URLS: 'WEBHOOK_ALLOW_PRIVATE_URLS',
});

/** The value of setting `name` (or of its first name) and the name it was read under, for messages; raw is undefined when neither is set. */
function setting(env: NodeJS.ProcessEnv, name: string): { name: string; raw: string | undefined } {
  const first = FIRST_NAMES[name];
  for (const candidate of first === undefined ? [name] : [name, first]) {
    const raw = env[candidate];
    if (raw !== undefined && raw !== '') return { name: candidate, raw };
  }
  return { name, raw: undefined };
}

function integer(env: NodeJS.ProcessEnv, key: string, fallback: number, min: number, max: number): number {
  const { name, raw } = setting(env, key);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function boolean(env: NodeJS.ProcessEnv, key: string, fallback: boolean): boolean {
  const { name, raw } = setting(env, key);
  if (raw === undefined) return fallback;
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

function secretKeys(env: NodeJS.ProcessEnv): { current: Buffer | undefined; previous: Buffer[] } {
  try {
    const current = env.SECRETS_KEY ? parseKey(env.SECRETS_KEY, 'SECRETS_KEY') : undefined;
    const previous = (env.SECRETS_KEY_PREVIOUS ?? '')
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean)
      .map((k, i) => parseKey(k, `SECRETS_KEY_PREVIOUS (key ${i + 1})`));
    if (previous.length > 0 && !current) throw new ConfigError('SECRETS_KEY_PREVIOUS needs SECRETS_KEY (the key secrets are re-sealed with)');
    return { current, previous };
  } catch (err) {
    if (err instanceof SecretsError) throw new ConfigError(err.message);
    throw err;
  }
}

function retryDelays(env: NodeJS.ProcessEnv): number[] {
  const raw = env.WEBHOOK_RETRY_DELAYS;
  if (raw === undefined || raw.trim() === '') return [5, 300, 1800, 7200, 18000, 36000, 36000].map((s) => s * 1000);
  const parts = raw.split(',').map((part) => part.trim());
  const seconds = parts.map(Number);
  if (parts.some((part) => part === '') || seconds.some((s) => !Number.isFinite(s) || s < 0 || s > 7 * 86_400) || seconds.length > 50) {
    throw new ConfigError(`WEBHOOK_RETRY_DELAYS must be a comma-separated list of at most 50 delays in seconds (0 to 604800), got "${raw}"`);
  }
  return seconds.map((s) => Math.round(s * 1000));
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
  const requestTimeoutMs = integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1_000, 600_000);
  const headersTimeoutMs = integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 1_000, 600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  const keys = secretKeys(env);
  const metaGraphTimeoutMs = integer(env, 'META_GRAPH_TIMEOUT_MS', 10_000, 100, 120_000);
  // Renewed while a job runs, the lease need not outlast a Graph, AI or webhook call.
  const jobLeaseMs = integer(env, 'JOB_LEASE_MS', 6_000, 1_000, 3_600_000);
  const aiBaseUrl = url(env, 'AI_BASE_URL', ['https:', 'http:'])?.replace(/\/+$/, '');
  const aiTimeoutMs = integer(env, 'AI_TIMEOUT_MS', 30_000, 100, 600_000);
  const port = integer(env, 'PORT', 3000, 0, 65535);
  const metricsPort = env.METRICS_PORT ? integer(env, 'METRICS_PORT', 0, 1, 65535) : undefined;
  if (metricsPort !== undefined && metricsPort === port) throw new ConfigError(`METRICS_PORT must differ from PORT (${port})`);
  const metricsToken = env.METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,512}$/.test(metricsToken)) {
    throw new ConfigError('METRICS_TOKEN must be 16 to 512 printable characters without spaces');
  }
  return Object.freeze({
    nodeEnv,
    port,
    host: env.HOST || '0.0.0.0',
    logLevel,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    databasePoolWaitMs: integer(env, 'DATABASE_POOL_WAIT_MS', 5_000, 100, 600_000),
    databaseStatementTimeoutMs: integer(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 10_000, 0, 3_600_000),
    databasePreparedStatements: boolean(env, 'DATABASE_PREPARED_STATEMENTS', true),
    databaseDirectUrl: url(env, 'DATABASE_DIRECT_URL', ['postgres:', 'postgresql:']),
    pgliteDir: path.resolve(env.PGLITE_DIR || 'data/pglite'),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: env.REDIS_PREFIX || 'sf:',
    rateLimitWindowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 100, 3_600_000),
    failedAuthLimit: integer(env, 'FAILED_AUTH_LIMIT', 30, 1, 1_000_000),
    keyCacheTtlMs: integer(env, 'KEY_CACHE_TTL_MS', 5_000, 0, 60_000),
    validateResponses: boolean(env, 'VALIDATE_RESPONSES', nodeEnv !== 'production'),
    webConcurrency: integer(env, 'WEB_CONCURRENCY', 1, 1, 64),
    trustProxy: trustProxy(env),
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 65_000, 1_000, 600_000),
    maxConnections: integer(env, 'MAX_CONNECTIONS', 1_000, 1, 1_000_000),
    streamsPerKey: integer(env, 'STREAMS_PER_KEY', 20, 1, 10_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    secretsKey: keys.current,
    secretsKeyPrevious: keys.previous,
    metaGraphUrl: (url(env, 'META_GRAPH_URL', ['https:', 'http:']) ?? 'https://graph.facebook.com/v23.0').replace(/\/+$/, ''),
    metaGraphTimeoutMs,
    retryBaseMs: integer(env, 'RETRY_BASE_MS', 1_000, 1, 600_000),
    retryMaxAttempts: integer(env, 'RETRY_MAX_ATTEMPTS', 10, 1, 100),
    deliveryConcurrency: integer(env, 'DELIVERY_CONCURRENCY', 64, 1, 1_000),
    jobLeaseMs,
    jobPollMs: integer(env, 'JOB_POLL_MS', 1_000, 10, 60_000),
    aiBaseUrl,
    aiApiKey: env.AI_API_KEY || undefined,
    aiTimeoutMs,
    aiReplyDelayMs: integer(env, 'AI_REPLY_DELAY_MS', 50, 0, 600_000),
    aiConcurrency: integer(env, 'AI_CONCURRENCY', 16, 1, 1_000),
    automationConcurrency: integer(env, 'AUTOMATION_CONCURRENCY', 8, 1, 1_000),
    automationsInline: boolean(env, 'AUTOMATIONS_INLINE', true),
    webhookRetryDelaysMs: Object.freeze(retryDelays(env)),
    outboundAllowPrivateUrls: boolean(env, 'OUTBOUND_ALLOW_PRIVATE_URLS', !env.DATABASE_URL),
    webhookConcurrency: integer(env, 'WEBHOOK_CONCURRENCY', 64, 1, 1_000),
    webhookEndpointConcurrency: integer(env, 'WEBHOOK_ENDPOINT_CONCURRENCY', 8, 1, 1_000),
    mediaStore: mediaStore(env),
    mediaFetchTimeoutMs: integer(env, 'MEDIA_FETCH_TIMEOUT_MS', 120_000, 100, 3_600_000),
    metricsEnabled: boolean(env, 'METRICS_ENABLED', true),
    metricsToken,
    metricsPort,
  });
}
