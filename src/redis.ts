// The Redis client behind the shared rate-limit counters. It fails fast rather than queueing:
// with Redis down, limits fail open in milliseconds and one warning per outage is logged.
import { Redis } from 'ioredis';
import type { Logger } from './logger.js';

export function createRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: 500,
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
  redis.on('close', () => wentDown('connection closed'));
  redis.on('ready', () => {
    if (down) logger.info('Redis is back: rate limits apply again');
    down = false;
  });
  return redis;
}
