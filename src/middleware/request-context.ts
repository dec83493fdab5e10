// Gives every request an id (echoing a sane client-sent X-Request-Id), a child logger that carries
// it on every line, and one access-log line when the response is done: who (client IP, key and
// workspace, null before authentication), what, the status and, for an error, its code. The child
// logger is made only when something logs, and the access line only at info level: most requests
// pay for neither.
import { randomUUID } from 'node:crypto';
import type { Express, Request, RequestHandler } from 'express';
import type { Logger } from '../logger.js';

const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;

export function requestContext(app: Express, logger: Logger): RequestHandler {
  const accessLog = logger.isLevelEnabled('info');
  // `req.log`, made on first use: a getter on the app's request prototype, which keeps every
  // request object the same shape instead of giving each one a property of its own.
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: Request) {
      const child = logger.child({ reqId: this.id });
      Object.defineProperty(this, 'log', { value: child });
      return child;
    },
  });
  return (req, res, next) => {
    const sent = req.get('x-request-id');
    const id = sent !== undefined && CLIENT_ID.test(sent) ? sent : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    // API answers are data for one client: never sniffed as another type, never stored by a cache.
    // (/docs sets its own caching.)
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-store');
    if (accessLog) {
      const started = process.hrtime.bigint();
      res.on('finish', () => {
        req.log.info(
          {
            method: req.method,
            path: req.originalUrl.split('?', 1)[0],
            status: res.statusCode,
            ...(res.locals.errorCode !== undefined && { errorCode: res.locals.errorCode }),
            ms: Number(process.hrtime.bigint() - started) / 1e6,
            ip: req.ip,
            keyId: req.auth?.keyId ?? null,
            workspaceId: req.auth?.workspaceId ?? null,
          },
          'request',
        );
      });
    }
    next();
  };
}
