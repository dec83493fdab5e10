// The one error type of the API; every failure leaves the service in this shape.
import type { components } from '../generated/api.js';

export type ErrorCode = components['schemas']['ErrorCode'];
export type ErrorDetail = components['schemas']['ErrorDetail'];
export type ErrorBody = components['schemas']['ErrorResponse'];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** The response body; `requestId` is the response's X-Request-Id. */
  toBody(requestId: string): ErrorBody {
    const error: ErrorBody['error'] = { code: this.code, message: this.message, requestId };
    // A path may name a key the client sent with a lone surrogate (`/body/\ud800`): the answer holds
    // only well-formed text (U+FFFD in its place), which every JSON parser and UTF-8 encoder takes.
    if (this.details) error.details = this.details.map((d) => (d.path.isWellFormed() ? d : { ...d, path: d.path.toWellFormed() }));
    return { error };
  }
}

export const notFound = (what: string): ApiError => new ApiError(404, 'not_found', `${what} not found.`);

export const invalidReference = (field: string, what: string): ApiError =>
  new ApiError(422, 'invalid_reference', `The ${what} does not exist.`, [{ path: `/body/${field}`, message: `no ${what} with this id` }]);

/** True when `err` is PostgreSQL's error `code` (e.g. 23505) raised by `constraint`. */
export function isConstraintError(err: unknown, code: string, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string } | null;
  return typeof e === 'object' && e !== null && e.code === code && e.constraint === constraint;
}
