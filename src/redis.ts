// The Redis client behind the shared rate-limit counters. It fails fast rather than queueing:
// with Redis down, limits fail open in milliseconds and one warning per outage is logged.
import { Redis } from 'ioredis';
import type { Logger } from './logger.js';

export function createRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: 500,
    // A Redis that stops answering (frozen, or its host gone without a reset) would otherwise keep
    // the connection "ready" and cost every request the command timeout: drop it and reconnect,
    // so requests fail fast while it is away.
    socketTimeout: 1_000,
    maxRetriesPerRequest: 0,
    connectTimeout: 2_000,
    retryStrategy: (times) => Math.min(100 * times, 2_000),
  });
  let down = false;
  const wentDown = (reason: string) => {
    if (down) return;
    down = true;
    logger.warn({ reason }, 'Redis unavailable: rate limits fail open until it returns');
  };
  redis.on('error', (err: Error) => wentDown(err.message));
  // 'reconnecting', not 'close': a close we asked for (quit at shutdown) is no outage.
  redis.on('reconnecting', () => wentDown('connection lost'));
  redis.on('ready', () => {
    if (down) logger.info('Redis is back: rate limits apply again');
    down = false;
  });
  return redis;
}
