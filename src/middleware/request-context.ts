// Gives every request an id (echoing a sane client-sent X-Request-Id), a child logger that carries
// it on every line, and one access-log line when the response is done.
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../logger.js';

const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;

export function requestContext(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const sent = req.get('x-request-id');
    req.id = sent !== undefined && CLIENT_ID.test(sent) ? sent : randomUUID();
    req.log = logger.child({ reqId: req.id });
    res.setHeader('X-Request-Id', req.id);
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
    next();
  };
}
