// JSON logs with pino; each request logs through a child that carries its request id.
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

const SECRET_FIELDS = ['accessToken', 'appSecret', 'verifyToken', 'secrets'];

/** A JSON logger at `level`, writing to stdout unless given another destination (tests capture lines). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    // Belt and braces: nothing logs headers, but if one ever does, the key stays out.
    // Channel secrets too: write-only on the API, never in a log line.
    redact: [
      'req.headers.authorization',
      'headers.authorization',
      'authorization',
      'apiKey',
      ...SECRET_FIELDS,
      ...SECRET_FIELDS.map((field) => `*.${field}`),
      ...SECRET_FIELDS.map((field) => `*.*.${field}`),
    ],
  };
  return destination ? pino(options, destination) : pino(options);
}
