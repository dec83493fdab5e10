// The typed shape of an operation handler, derived from the generated contract types:
// a handler receives its validated inputs and returns its status and body.
import type { Request, RequestHandler, Response } from 'express';
import type { AugmentedRequest } from 'express-rate-limit';
import type { Logger } from 'pino';
import type { operations } from '../../generated/api.js';
import { limitBounds, pageBounds, type Bounds, type OperationId } from '../contract.js';
import type { Db } from '../db/database.js';
import type { AuthContext } from '../middleware/authenticate.js';
import type { SecretBox } from '../secrets.js';
import { ApiError } from '../errors.js';
import { JsonText } from '../db/pagination.js';
import { runIdempotent } from '../idempotency.js';
import type { EventStreams } from '../stream/hub.js';
import type { MediaStore } from '../media/store.js';
import type { Upload } from '../media/upload.js';

type Op<K extends OperationId> = operations[K];
type Defined<T> = [T] extends [never] ? Record<string, never> : NonNullable<T>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type SuccessStatus<K extends OperationId> = Extract<keyof Op<K>['responses'], 200 | 201 | 202 | 204>;

export type PathParams<K extends OperationId> = Defined<Op<K>['parameters']['path']>;
export type Query<K extends OperationId> = Defined<Op<K>['parameters']['query']>;
type RequestBody<K extends OperationId> = NonNullable<Op<K>['requestBody']>;
/** The JSON body; an optional one (`requestBody.required: false`) left out reads as `{}` (middleware/body.ts). */
export type Body<K extends OperationId> = [RequestBody<K>] extends [never]
  ? undefined
  : RequestBody<K> extends { content: { 'application/json': infer B } }
    ? B
    : undefined;
/**
 * Says whether a body holds a secret shown only in this answer (the contract's `secret` field, as
 * a new webhook endpoint's): its reply must say `holdsSecret: true`, so the result an
 * Idempotency-Key stores for replays is kept sealed under SECRETS_KEY, as the secret itself is.
 */
type SecretFlag<B> = [B] extends [never] ? unknown : 'secret' extends keyof B ? { holdsSecret: true } : { holdsSecret?: never };

/** An answer the handler writes itself (a `text/event-stream`, a file): it takes the response. */
export interface StreamReply {
  status: 200;
  stream: (req: Request, res: Response) => Promise<void>;
}
/** An answer that is not JSON (an event stream, a file's bytes): the handler writes it. */
type IsStream<K extends OperationId> = Op<K>['responses'] extends { 200: { content: infer C } } ? ('application/json' extends keyof C ? false : true) : false;

/** A body is the contract's type, or JSON text already holding it (lists, answered by PostgreSQL). */
export type Reply<K extends OperationId> =
  IsStream<K> extends true
    ? StreamReply
    : {
        [S in SuccessStatus<K>]: S extends 204
          ? { status: 204 }
          : { status: S; body: JsonOf<Op<K>['responses'][S]> | JsonText<JsonOf<Op<K>['responses'][S]>> } & SecretFlag<JsonOf<Op<K>['responses'][S]>>;
      }[SuccessStatus<K>];

/** Where the key stands in its rate-limit window, this request counted. */
export interface RateLimitState {
  limit: number;
  remaining: number;
  /** When the window ends; the store may not know. */
  resetTime: Date | undefined;
}

/** What handlers use besides the database, made once at start-up. */
export interface Services {
  /** Seals and opens secrets (channels', webhook endpoints', stored answers holding one); absent when the operator configured no SECRETS_KEY. */
  secrets?: SecretBox | undefined;
  /** Whether webhook endpoint URLs may be http:// or private (OUTBOUND_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls?: boolean;
  /** This instance's live event streams (GET /events/stream); absent, the stream is a 503. */
  streams?: EventStreams | undefined;
  /** Where media files' bytes are kept (MEDIA_STORE). */
  media?: MediaStore | undefined;
}

export interface Call<K extends OperationId> {
  auth: AuthContext;
  /** Undefined when the request is not limited: an enterprise key, or the counters unreachable. */
  rateLimit: RateLimitState | undefined;
  db: Db;
  services: Services;
  params: PathParams<K>;
  query: Query<K>;
  body: Body<K>;
  /** The spooled file of a raw-body operation (POST /media). */
  upload: Upload | undefined;
  log: Logger;
}

export type Handler<K extends OperationId> = (call: Call<K>) => Promise<Reply<K>>;

/** Every operation of the contract, each with its handler: a missing one fails the type check. */
export type Handlers = { [K in OperationId]: Handler<K> };

type AnyHandler = (call: Call<OperationId>) => Promise<{ status: number; body?: unknown; holdsSecret?: boolean } | StreamReply>;

/**
 * Runs the matched operation's handler and sends what it returns. JSON text goes out as it is,
 * unless responses are validated: the validator checks what passes through res.json.
 */
export function dispatch(
  handlers: Handlers,
  db: Db,
  options: {
    validateResponses: boolean;
    services?: Services;
    /** The operations whose Idempotency-Key lookup travels with their first statement (runIdempotent's `withFirstStatement`). */
    databaseOnly?: ReadonlySet<OperationId>;
  },
): RequestHandler {
  const services = options.services ?? {};
  const databaseOnly = options.databaseOnly ?? new Set<OperationId>();
  return async (req, res) => {
    const handler = handlers[req.operation!.operationId] as unknown as AnyHandler;
    const limited = (req as AugmentedRequest).rateLimit;
    const handle = (db: Db) =>
      handler({
        auth: req.auth!,
        rateLimit: limited && { limit: limited.limit, remaining: limited.remaining, resetTime: limited.resetTime },
        db,
        services,
        // The validator's match: Express resets req.params between the layers of app.use('/v1', ...).
        params: req.openapi?.pathParams as never,
        query: req.query,
        // As the contract declares it: the validator checked it before this handler runs.
        body: req.body as Body<OperationId>,
        upload: req.upload,
        get log() {
          return req.log;
        },
      });
    const key = req.method === 'POST' ? req.get('idempotency-key') : undefined;
    let reply: { status: number; body?: unknown };
    if (key === undefined) {
      const answer = await handle(db);
      if ('stream' in answer) return answer.stream(req, res);
      reply = answer;
    } else {
      const scope = { workspaceId: req.auth!.workspaceId, apiKeyId: req.auth!.keyId, key };
      const request = { method: req.method, path: req.originalUrl.split('?', 1)[0]!, body: req.body as unknown };
      const withFirstStatement = databaseOnly.has(req.operation!.operationId);
      const result = await runIdempotent(db, scope, request, handle, services.secrets, { withFirstStatement });
      reply = result.reply;
      if (result.replayed) res.set('Idempotent-Replayed', 'true');
    }
    res.status(reply.status);
    if (reply.body === undefined) res.end();
    else if (!(reply.body instanceof JsonText)) res.json(reply.body);
    else if (options.validateResponses) res.json(JSON.parse(reply.body.text));
    else res.type('application/json').send(reply.body.text);
  };
}

function wholeNumber(value: unknown, bounds: Bounds, name: string): number {
  if (value === undefined) return bounds.default;
  const n = Number(value);
  if (Number.isInteger(n) && n >= bounds.minimum && n <= bounds.maximum) return n;
  throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
    { path: `/query/${name}`, message: `must be an integer from ${bounds.minimum} to ${bounds.maximum}` },
  ]);
}

/**
 * Page and limit with the contract's defaults. The validator checks their range, but its query
 * coercion lets `Infinity` and `1e400` through as numbers, so the bounds are enforced here too.
 */
export function paging(query: { page?: number; limit?: number }): { page: number; limit: number } {
  return { page: wholeNumber(query.page, pageBounds, 'page'), limit: wholeNumber(query.limit, limitBounds, 'limit') };
}
