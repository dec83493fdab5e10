// HTTP and the metrics: each request counted and timed by operation (the contract's operationId, or
// the route template of an endpoint outside the contract; never a raw path), and GET /metrics in
// Prometheus' text format, behind METRICS_TOKEN when it is set, on the public port or METRICS_PORT's.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import cluster from 'node:cluster';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import { ApiError } from '../errors.js';
import { metricsFromPrimary } from './cluster.js';
import { metrics, registry } from './registry.js';

/** Endpoints outside the contract, by path. */
const SERVICE_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/openapi.json', '/openapi.yaml', '/metrics', '/docs', '/docs/']);
const META_WEBHOOK = /^\/webhooks\/meta\/[^/]+\/?$/;

/** The operation label of a request: bounded whatever the path (an unknown path is `unmatched`). */
function operationOf(req: Request): string {
  if (req.operation) return req.operation.operationId;
  const path = req.originalUrl.split('?', 1)[0]!;
  if (META_WEBHOOK.test(path)) return req.method === 'POST' ? 'receiveMetaWebhook' : req.method === 'GET' ? 'verifyMetaWebhook' : 'unmatched';
  if (SERVICE_PATHS.has(path)) return path === '/docs/' ? '/docs' : path;
  if (path.startsWith('/docs/')) return '/docs/*';
  return 'unmatched';
}

/** nginx's "client closed request": the client left before an answer reached it (as the access line says). */
const CLIENT_CLOSED_REQUEST = 499;

/** Counts and times every request when its answer is sent, or when its client leaves. */
export function requestMetrics(): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once('close', () => {
      const unanswered = !res.writableFinished && (!res.headersSent || !req.complete);
      const status = unanswered ? CLIENT_CLOSED_REQUEST : res.statusCode;
      const operation = operationOf(req);
      metrics.httpRequests.inc({ operation, status });
      metrics.httpDuration.observe({ operation, status_class: `${Math.floor(status / 100)}xx` }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Whether `header` is `Bearer <token>`; compared in constant time. */
function authorized(header: string | undefined, token: Buffer): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match !== null && timingSafeEqual(digest(match[1]!), token);
}

/** This process's metrics, or in a cluster's worker the whole cluster's (its workers' summed by the primary). */
export function readMetrics(): Promise<string> {
  return cluster.isWorker ? metricsFromPrimary() : registry.metrics();
}

/**
 * Answers GET /metrics on a plain Node server or an Express app alike: 401 in the API's error shape
 * without the token (when one is set), else the exposition `read` gives.
 */
export function metricsHandler(options: { token: string | undefined; read?: () => Promise<string> }): (req: IncomingMessage, res: ServerResponse) => void {
  const token = options.token === undefined ? undefined : digest(options.token);
  const read = options.read ?? readMetrics;
  return (req, res) => {
    const requestId = (req as Partial<Request>).id ?? randomUUID();
    const fail = (error: ApiError): void => {
      res.writeHead(error.status, {
        'Content-Type': 'application/json; charset=utf-8',
        'X-Request-Id': requestId,
        'Cache-Control': 'no-store',
        ...error.headers,
      });
      res.end(JSON.stringify(error.toBody(requestId)));
    };
    if (token && !authorized(req.headers.authorization, token)) {
      fail(new ApiError(401, 'unauthorized', 'Missing or invalid metrics token (METRICS_TOKEN).', undefined, { 'WWW-Authenticate': 'Bearer' }));
      return;
    }
    read().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': registry.contentType, 'X-Request-Id': requestId, 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => fail(new ApiError(503, 'service_unavailable', `The metrics could not be read: ${err instanceof Error ? err.message : String(err)}`)),
    );
  };
}

/**
 * GET /metrics on a port of its own (METRICS_PORT), where a scraper reaches it and the public does
 * not; anything else there is a 404. Resolves once listening, with its close.
 */
export async function listenForMetrics(options: {
  port: number;
  host: string;
  token: string | undefined;
  read?: () => Promise<string>;
}): Promise<{ port: number; close: () => Promise<void> }> {
  const handler = metricsHandler(options);
  const server = http.createServer((req, res) => {
    if ((req.method === 'GET' || req.method === 'HEAD') && req.url?.split('?', 1)[0] === '/metrics') return handler(req, res);
    const requestId = randomUUID();
    res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': requestId });
    res.end(JSON.stringify(new ApiError(404, 'not_found', 'No such endpoint; this port serves GET /metrics.').toBody(requestId)));
  });
  server.listen(options.port, options.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
