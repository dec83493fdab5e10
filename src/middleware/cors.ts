// Cross-origin calls to /v1 (CORS), for pages on any origin, as GitHub's and Stripe's APIs allow
// them: the API takes no cookies, so a page acts only with the key or stream token it holds itself;
// `*` gives it nothing it did not bring. Every answer (errors and the stream included) allows any
// origin and lets the page read the API's own headers; a preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 here, before authentication and the 405 of a
// method the path does not take (the browser then sends the request, and that gets its answer).
// The mock (scripts/mock-front.ts) answers the same.
import type { RequestHandler } from 'express';

/** The response headers a page may read: those the contract documents. */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Retry-After',
  'Idempotent-Replayed',
  'Location',
  'Allow',
  'ETag',
  'Accept-Ranges',
  'Content-Range',
  'Content-Disposition',
].join(', ');

/** The request headers a page may send when its preflight names none: those the contract reads. */
const ALLOWED_HEADERS = 'Authorization, Content-Type, Content-Encoding, Idempotency-Key, X-Request-Id, Last-Event-ID, If-None-Match, Range';

export const cors: RequestHandler = (req, res, next) => {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
  if (req.method !== 'OPTIONS' || req.get('access-control-request-method') === undefined) return next();
  res.setHeader('Access-Control-Allow-Methods', 'GET, HEAD, POST, PATCH, DELETE');
  // Whatever headers the page will send: the service reads those it documents and ignores the rest.
  res.setHeader('Access-Control-Allow-Headers', req.get('access-control-request-headers') ?? ALLOWED_HEADERS);
  res.setHeader('Access-Control-Max-Age', '7200');
  res.status(204).end();
};
