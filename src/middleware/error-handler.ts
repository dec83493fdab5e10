// The one place a failure becomes a response: ApiError, validator, body-parser and database errors
// all leave as {"error":{"code","message","requestId","details?"}}; anything else is a logged 500.
import type { IncomingMessage } from 'node:http';
import type { ErrorRequestHandler } from 'express';
import { describeProblem } from '../contract.js';
import { ApiError, type ErrorDetail } from '../errors.js';

interface ValidatorError {
  status: number;
  headers?: Record<string, string>;
  message?: string;
  errors?: Array<{ path?: string; message?: string }>;
}

interface BodyParserError {
  type: string;
  status?: number;
}

interface DatabaseError {
  code?: string;
  constraint?: string;
  message?: string;
}

const MAX_DETAILS = 20;
const IF_SUMMARY = /^must match "(then|else)" schema$/;
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', '53300']);
// Messages of pg, pg-pool and PGlite for a connection that broke, or never came.
const CONNECTION_MESSAGES = /connection terminated|timeout exceeded when trying to connect|not queryable|PGlite is closed|Client was closed/i;

function isValidatorError(err: unknown): err is ValidatorError {
  return typeof err === 'object' && err !== null && typeof (err as ValidatorError).status === 'number' && 'errors' in err;
}

function fromValidator(err: ValidatorError): ApiError {
  // Every problem is reported (allErrors), but a body built to fail a thousand ways gets 20 back.
  // A conditional schema's summary line (AgentCreate's if/then/else) only repeats the problems its
  // branch already names.
  const problems = (err.errors ?? []).filter((e) => !IF_SUMMARY.test(e.message ?? ''));
  const details: ErrorDetail[] = problems.slice(0, MAX_DETAILS).map((e) => describeProblem(e.path ?? '', e.message ?? 'is invalid'));
  switch (err.status) {
    case 400:
      return new ApiError(400, 'validation_error', 'The request does not match the contract.', details);
    case 415:
      return new ApiError(415, 'unsupported_media_type', 'Send the body as application/json.');
    case 413:
      return new ApiError(413, 'payload_too_large', 'The request body is larger than 1 MiB.');
    case 404:
      return new ApiError(404, 'not_found', 'No such endpoint.');
    case 405:
      return new ApiError(405, 'method_not_allowed', 'This method is not allowed on this path.');
    default:
      // A response that breaks the contract (validation of responses in tests and development).
      return new ApiError(500, 'internal_error', 'Something went wrong on our side; quote the X-Request-Id when reporting it.');
  }
}

function fromBodyParser(err: BodyParserError): ApiError | undefined {
  switch (err.type) {
    case 'entity.parse.failed':
      return new ApiError(400, 'invalid_json', 'The request body is not valid JSON.');
    case 'entity.too.large':
      return new ApiError(413, 'payload_too_large', 'The request body is larger than 1 MiB.');
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return new ApiError(415, 'unsupported_media_type', 'Send the body as application/json in UTF-8.');
    case 'request.aborted':
    case 'request.size.invalid':
      return new ApiError(400, 'invalid_json', 'The request body was incomplete.');
    default:
      return undefined;
  }
}

/**
 * The body field a composite foreign key protects, e.g. threads_workspace_id_agent_id_fkey -> agentId
 * (an agent), channels_workspace_id_default_agent_id_fkey -> defaultAgentId (an agent).
 */
function referencedField(constraint: string | undefined): { field: string; what: string } {
  const name = /workspace_id_(\w+?)_id_fkey$/.exec(constraint ?? '')?.[1] ?? 'record';
  const words = name.split('_');
  return { field: `${words.map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join('')}Id`, what: words.at(-1)! };
}

function fromDatabase(err: DatabaseError): ApiError | undefined {
  const code = err.code ?? '';
  if (code === '23505') return new ApiError(409, 'conflict', 'The request clashes with an existing record.');
  if (code === '23503') {
    const { field, what } = referencedField(err.constraint);
    return new ApiError(422, 'invalid_reference', `The ${what} does not exist.`, [{ path: `/body/${field}`, message: `no ${what} with this id` }]);
  }
  if (code === '22021' || code === '22P05') {
    return new ApiError(400, 'validation_error', 'The request contains characters that cannot be stored (such as NUL).');
  }
  if (code === '57014') {
    // statement_timeout (or a cancel): the database is too busy to answer in time.
    return new ApiError(503, 'service_unavailable', 'The database took too long to answer; retry later.', undefined, { 'Retry-After': '5' });
  }
  if (code === '40001' || code === '40P01') {
    // A serialization failure or a deadlock: the transaction was rolled back whole, and the same
    // request again will most likely pass (Meta retries its webhooks on any non-200 anyway).
    return new ApiError(503, 'service_unavailable', 'The request collided with a concurrent one; retry it.', undefined, { 'Retry-After': '1' });
  }
  if (code.startsWith('08') || code.startsWith('57P') || CONNECTION_CODES.has(code) || CONNECTION_MESSAGES.test(err.message ?? '')) {
    return new ApiError(503, 'service_unavailable', 'The service is temporarily unavailable; retry later.', undefined, {
      'Retry-After': '5',
    });
  }
  return undefined;
}

/** Maps any thrown value to the ApiError the client sees. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof URIError) {
    return new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: '/params', message: 'is not a valid percent-encoded value' },
    ]);
  }
  if (typeof err === 'object' && err !== null) {
    if (typeof (err as BodyParserError).type === 'string') {
      const mapped = fromBodyParser(err as BodyParserError);
      if (mapped) return mapped;
    }
    if (isValidatorError(err)) return fromValidator(err);
    const mapped = fromDatabase(err);
    if (mapped) return mapped;
  }
  return new ApiError(500, 'internal_error', 'Something went wrong on our side; quote the X-Request-Id when reporting it.');
}

/** How much of a refused request's unread body is read and dropped (twice the largest file POST /media takes), and for how long. */
export const DRAIN_LIMIT_BYTES = 256 * 2 ** 20;
export const DRAIN_LIMIT_MS = 30_000;

/**
 * A request refused before its body was read (a 413 on its declared size, a 401 on its key): the
 * rest of the body is read and dropped, so a client still sending reads the answer rather than a
 * reset (a socket closed with unread bytes resets the connection, and the client's next write
 * fails with EPIPE before it reads anything), and the connection can serve its next request. At
 * most DRAIN_LIMIT_BYTES and DRAIN_LIMIT_MS, then the connection is cut.
 */
function dropRestOfBody(req: IncomingMessage): void {
  if (req.complete || req.destroyed) return;
  let dropped = 0;
  const cut = (): void => {
    req.socket.destroy();
  };
  const timer = setTimeout(cut, DRAIN_LIMIT_MS).unref();
  const stop = (): void => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DRAIN_LIMIT_BYTES) cut();
  });
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}

export const errorHandler: ErrorRequestHandler = (err, req, res, next) => {
  if (res.headersSent) return next(err);
  const apiError = toApiError(err);
  dropRestOfBody(req);
  if (apiError.status === 503) {
    // An outage of a dependency, not a bug: one line, without the stack.
    req.log.warn({ status: 503, cause: (err as Error)?.message }, 'request failed: service unavailable');
  } else if (apiError.status >= 500) {
    req.log.error({ err, status: apiError.status }, 'request failed');
  }
  if (apiError.headers) res.set(apiError.headers);
  if ((err as ValidatorError).headers) res.set((err as ValidatorError).headers);
  res.locals.errorCode = apiError.code;
  // res.send, not res.json: the response validator wraps res.json, and an error must always leave.
  res
    .status(apiError.status)
    .type('application/json')
    .send(JSON.stringify(apiError.toBody(req.id)));
};
