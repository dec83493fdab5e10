// The HTTP server around the app: the operator's limits (timeouts, open connections), transport
// errors answered in the API's error shape, and the drain a stopping process runs. Open event
// streams come on top of MAX_CONNECTIONS: however many are open, requests keep their connections.
import { randomUUID } from 'node:crypto';
import http, { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import type { StreamSlots } from './stream/key-slots.js';

export type HttpLimits = Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'>;

export interface DrainResult {
  /** Requests in flight when the drain began. */
  inFlight: number;
  /** Requests still unanswered at the deadline, whose connections were closed. */
  cut: number;
}

export interface HttpServer {
  server: Server;
  /** Requests being answered now. */
  inFlight(): number;
  /**
   * Stops accepting connections, closes idle keep-alive ones, answers what is in flight with
   * `Connection: close`, and at `deadline` closes whatever is left.
   */
  drain(deadline: AbortSignal): Promise<DrainResult>;
}

/** Transport errors Node reports before (or instead of) handing the request to the app. */
function transportError(code: string | undefined): { status: number; code: string; message: string } {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'request_timeout', message: 'The request was not received in time; the connection is closed.' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'The request headers are too large.' };
    default:
      return { status: 400, code: 'validation_error', message: 'The request is not valid HTTP/1.1.' };
  }
}

const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));

/**
 * Node checks the header and request deadlines of open connections every
 * `connectionsCheckingInterval`; a check a tenth as long as the shorter deadline cuts a slow client
 * within 10 % of its limit.
 */
export function createHttpServer(app: Express, limits: HttpLimits, logger: Logger, streams?: Pick<StreamSlots, 'watch'>): HttpServer {
  const server = http.createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 10))),
  });
  server.maxConnections = limits.maxConnections;
  // Each open stream's connection is added to the cap, so streams never take what requests are given.
  streams?.watch((open) => (server.maxConnections = limits.maxConnections + open));

  const responses = new Set<ServerResponse>();
  let draining = false;
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    responses.add(res);
    if (draining) res.setHeader('Connection', 'close');
    res.once('close', () => {
      responses.delete(res);
      if (draining) server.closeIdleConnections();
    });
  });
  server.on('request', app);

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse & { req?: { id?: string } } })._httpMessage;
    if (inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const error = transportError(err.code);
    // The request's id when the app saw it (a body too slow), else one of its own (headers too slow).
    const requestId = inFlight?.req?.id ?? randomUUID();
    logger.info({ code: err.code, status: error.status, reqId: requestId }, 'connection closed: client error');
    const body = JSON.stringify({ error: { code: error.code, message: error.message, requestId } });
    socket.end(
      [
        `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}`,
        'Content-Type: application/json; charset=utf-8',
        `Content-Length: ${Buffer.byteLength(body)}`,
        'X-Content-Type-Options: nosniff',
        'Cache-Control: no-store',
        `X-Request-Id: ${requestId}`,
        'Connection: close',
        '',
        body,
      ].join('\r\n'),
    );
    // A client that never reads must not keep the socket: it goes a moment after the answer.
    setTimeout(() => socket.destroy(), 1_000).unref();
  });

  let dropped = 0;
  let dropWarned = 0;
  server.on('drop', () => {
    dropped++;
    if (Date.now() - dropWarned < 60_000) return;
    dropWarned = Date.now();
    logger.warn({ maxConnections: limits.maxConnections, droppedSoFar: dropped }, 'connection refused: MAX_CONNECTIONS reached');
  });

  return {
    server,
    inFlight: () => responses.size,
    async drain(deadline) {
      draining = true;
      const inFlight = responses.size;
      for (const res of responses) if (!res.headersSent) res.setHeader('Connection', 'close');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await Promise.race([closed, aborted(deadline)]);
      const cut = responses.size;
      if (deadline.aborted) {
        server.closeAllConnections();
        await closed;
      }
      return { inFlight, cut };
    },
  };
}
