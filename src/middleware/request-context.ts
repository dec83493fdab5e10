// Gives every request an id (echoing a sane client-sent X-Request-Id), a child logger that carries
// it on every line, and one access-log line when the response is done: who (client IP, key and
// workspace, null before authentication), what, the status and, for an error, its code. A client
// that leaves before the whole answer is sent gets its line too, when the connection closes, with
// `aborted: true`: status 499 when no answer had started or the client left before its request was
// whole (whatever was answered then, nobody read it), else the status sent. The child logger is made only when
// something logs, and the access line only at info level: most requests pay for neither.
import { randomUUID } from 'node:crypto';
import type { Express, Request, RequestHandler } from 'express';
import type { Logger } from '../logger.js';

const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;
/** The access line's status of a request whose client left before any answer reached it (nginx's "client closed request"). */
const CLIENT_CLOSED_REQUEST = 499;

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
      // Read now: once a client has left, its socket no longer tells its address.
      const ip = req.ip;
      // 'close' comes after 'finish' for an answer sent whole, and alone when the client left first.
      res.once('close', () => {
        const aborted = !res.writableFinished;
        // A request the client left mid-body may have been answered (its body's read failing) just before the close came.
        const unanswered = aborted && (!res.headersSent || !req.complete);
        req.log.info(
          {
            method: req.method,
            path: req.originalUrl.split('?', 1)[0],
            status: unanswered ? CLIENT_CLOSED_REQUEST : res.statusCode,
            ...(aborted && { aborted }),
            ...(!unanswered && res.locals.errorCode !== undefined && { errorCode: res.locals.errorCode }),
            ms: Number(process.hrtime.bigint() - started) / 1e6,
            ip,
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
