// The typed shape of an operation handler, derived from the generated contract types:
// a handler receives its validated inputs and returns its status and body.
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { operations } from '../../generated/api.js';
import type { OperationId } from '../contract.js';
import type { Db } from '../db/database.js';
import type { AuthContext } from '../middleware/authenticate.js';
import { ApiError } from '../errors.js';
import { JsonText } from '../db/pagination.js';

type Op<K extends OperationId> = operations[K];
type Defined<T> = [T] extends [never] ? Record<string, never> : NonNullable<T>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type SuccessStatus<K extends OperationId> = Extract<keyof Op<K>['responses'], 200 | 201 | 204>;

export type PathParams<K extends OperationId> = Defined<Op<K>['parameters']['path']>;
export type Query<K extends OperationId> = Defined<Op<K>['parameters']['query']>;
export type Body<K extends OperationId> = Op<K> extends { requestBody: { content: { 'application/json': infer B } } } ? B : undefined;
/** A body is the contract's type, or JSON text already holding it (lists, answered by PostgreSQL). */
export type Reply<K extends OperationId> = {
  [S in SuccessStatus<K>]: S extends 204
    ? { status: 204 }
    : { status: S; body: JsonOf<Op<K>['responses'][S]> | JsonText<JsonOf<Op<K>['responses'][S]>> };
}[SuccessStatus<K>];

export interface Call<K extends OperationId> {
  auth: AuthContext;
  db: Db;
  params: PathParams<K>;
  query: Query<K>;
  body: Body<K>;
  log: Logger;
}

export type Handler<K extends OperationId> = (call: Call<K>) => Promise<Reply<K>>;

/** Every operation of the contract, each with its handler: a missing one fails the type check. */
export type Handlers = { [K in OperationId]: Handler<K> };

type AnyHandler = (call: Call<OperationId>) => Promise<{ status: number; body?: unknown }>;

/**
 * Runs the matched operation's handler and sends what it returns. JSON text goes out as it is,
 * unless responses are validated: the validator checks what passes through res.json.
 */
export function dispatch(handlers: Handlers, db: Db, options: { validateResponses: boolean }): RequestHandler {
  return async (req, res) => {
    const handler = handlers[req.operation!.operationId] as unknown as AnyHandler;
    const reply = await handler({
      auth: req.auth!,
      db,
      // The validator's match: Express resets req.params between the layers of app.use('/v1', ...).
      params: req.openapi?.pathParams as never,
      query: req.query as never,
      body: req.body,
      get log() {
        return req.log;
      },
    });
    res.status(reply.status);
    if (reply.body === undefined) res.end();
    else if (!(reply.body instanceof JsonText)) res.json(reply.body);
    else if (options.validateResponses) res.json(JSON.parse(reply.body.text));
    else res.type('application/json').send(reply.body.text);
  };
}

const MAX_PAGE = 1_000_000;
const MAX_LIMIT = 100;

function wholeNumber(value: unknown, fallback: number, max: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (Number.isInteger(n) && n >= 1 && n <= max) return n;
  throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
    { path: `/query/${name}`, message: `must be an integer from 1 to ${max}` },
  ]);
}

/**
 * Page and limit with the contract's defaults. The validator checks their range, but its query
 * coercion lets `Infinity` and `1e400` through as numbers, so the bounds are enforced here too.
 */
export function paging(query: { page?: number; limit?: number }): { page: number; limit: number } {
  return { page: wholeNumber(query.page, 1, MAX_PAGE, 'page'), limit: wholeNumber(query.limit, 20, MAX_LIMIT, 'limit') };
}
