// Gives every request an id (echoing a sane client-sent X-Request-Id), a child logger that carries
// it on every line, and one access-log line when the response is done. The child logger is made
// only when something logs, and the access line only at info level: most requests pay for neither.
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../logger.js';

const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;

export function requestContext(logger: Logger): RequestHandler {
  const accessLog = logger.isLevelEnabled('info');
  return (req, res, next) => {
    const sent = req.get('x-request-id');
    const id = sent !== undefined && CLIENT_ID.test(sent) ? sent : randomUUID();
    req.id = id;
    let child: Logger | undefined;
    Object.defineProperty(req, 'log', { get: () => (child ??= logger.child({ reqId: id })), configurable: true });
    res.setHeader('X-Request-Id', id);
    if (accessLog) {
      const started = process.hrtime.bigint();
      res.on('finish', () => {
        req.log.info(
          {
            method: req.method,
            path: req.originalUrl.split('?', 1)[0],
            status: res.statusCode,
            ms: Number(process.hrtime.bigint() - started) / 1e6,
            keyId: req.auth?.keyId,
          },
          'request',
        );
      });
    }
    next();
  };
}
