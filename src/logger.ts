// JSON logs with pino; each request logs through a child that carries its request id.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    // Belt and braces: nothing logs headers, but if one ever does, the key stays out.
    redact: ['req.headers.authorization', 'headers.authorization', 'authorization', 'apiKey'],
  });
}
