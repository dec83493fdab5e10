// The body (step 5 of openapi.yaml's "Order of checks"): only operations with a body read one; it must be
// application/json in UTF-8 (415), well-formed and nested at most MAX_JSON_DEPTH deep (400
// invalid_json) and at most 1 MiB (413). Text is stored exactly as sent or refused: invalid UTF-8 and
// lone surrogates are a 400, never U+FFFD. Nothing a client sends can throw out of this middleware.
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import express, { type RequestHandler } from 'express';
import { maxBodyMembers } from '../contract.js';
import { ApiError } from '../errors.js';
import { MAX_JSON_DEPTH, scanJson, tooDeep } from '../json-scan.js';
import { uploadProblem } from '../media/upload.js';

interface BodyRequest extends IncomingMessage {
  /** Set while reading: the raw text holds a `\uD800`-style escape, so its strings need a look. */
  surrogateEscapes?: boolean;
  /** Set while reading: the raw text holds enough commas for an array or object wider than any of the contract's. */
  mayBeWider?: boolean;
}

const notUtf8 = (): ApiError => new ApiError(415, 'unsupported_media_type', 'Send the body as application/json in UTF-8.');

function invalidText(path: string, message: string): ApiError {
  return new ApiError(400, 'validation_error', 'The request body is not valid Unicode text.', [{ path, message }]);
}

/** Where the first invalid UTF-8 sequence starts (only asked once the whole body failed). */
function firstInvalidByte(buf: Buffer): number {
  let i = 0;
  while (i < buf.length) {
    const lead = buf[i]!;
    const size = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    // isUtf8 on the one sequence judges overlong forms, surrogates and code points past U+10FFFF.
    if (size === 0 || i + size > buf.length || !isUtf8(buf.subarray(i, i + size))) return i;
    i += size;
  }
  return i;
}

/** 1 MiB: body-parser's `1mb`. */
const MAX_JSON_BYTES = 2 ** 20;

const parseJson = express.json({
  limit: MAX_JSON_BYTES,
  // Not strict: a JSON scalar is valid JSON that breaks the contract (400 validation_error), not broken JSON.
  strict: false,
  type: 'application/json',
  // The raw bytes, before JSON.parse: the contract promises UTF-8, and the depth scan reads UTF-8
  // (body-parser would also decode UTF-16 and UTF-32, whose bytes the scan cannot read).
  verify(req: BodyRequest, _res, buf, encoding) {
    if (encoding !== 'utf-8') throw notUtf8();
    if (!isUtf8(buf)) throw invalidText('/body', `is not valid UTF-8 (byte ${firstInvalidByte(buf)})`);
    const scan = scanJson(buf, MAX_JSON_DEPTH, maxBodyMembers);
    if (scan.tooDeep) throw tooDeep();
    req.surrogateEscapes = scan.surrogateEscape;
    req.mayBeWider = scan.mayBeWider;
  },
});

/** The JSON pointer of `key` inside the value at `path` (RFC 6901: `~` and `/` escaped). */
const pointerTo = (path: string, key: string): string => `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;

/**
 * The JSON pointer of the first string (or key) holding a lone surrogate, in document order, or
 * undefined. A loop over a stack of its own, not recursion: its depth costs heap, never call stack.
 */
function loneSurrogateAt(body: unknown): string | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value: body, path: '/body' }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (typeof value === 'string') {
      if (!value.isWellFormed()) return path;
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    const entries = Object.entries(value as Record<string, unknown>);
    // Pushed last to first, each key above its value, so they come off in document order.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      const at = pointerTo(path, key);
      pending.push({ value: item, path: at }, { value: key, path: at });
    }
  }
  return undefined;
}

/**
 * Errors of reading the body that body-parser leaves untyped: a Content-Encoding it knows whose
 * bytes do not decode (zlib's Z_DATA_ERROR, brotli's ERR__ERROR_FORMAT_*). Our verify's ApiError
 * comes back as itself (body-parser only adds a status and a type to an Error it is given).
 */
function readError(err: unknown, req: IncomingMessage): unknown {
  if (typeof err !== 'object' || err === null || err instanceof ApiError) return err;
  const cause = err as { type?: string; code?: string };
  if (cause.type === undefined && (cause.code?.startsWith('Z_') || cause.code?.startsWith('ERR__') || cause.code === 'ERR_BROTLI_INVALID_PARAM')) {
    const encoding = req.headers['content-encoding'];
    return new ApiError(400, 'invalid_json', `The request body could not be decoded as Content-Encoding: ${encoding}.`);
  }
  return err;
}

/**
 * Whether the body declares (Content-Length, no Content-Encoding) more than 1 MiB: answered at once,
 * unparsed (the error handler drops the rest of it, within its limits), where body-parser would
 * buffer up to the limit before its 413. A compressed body is measured as it inflates, by body-parser.
 */
function declaredTooLarge(req: IncomingMessage): boolean {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
  return Number(req.headers['content-length']) > MAX_JSON_BYTES;
}

export const jsonBody: RequestHandler = (req, res, next) => {
  if (!req.operation!.hasBody) return next();
  // A file (POST /media): its type and declared size are checked here, its bytes read after the contract's checks.
  if (req.operation!.rawBody) return next(uploadProblem(req));
  const type = req.is('application/json');
  // No body, whatever its declared type (clients often declare JSON on every request): an optional
  // body reads as the empty object.
  const none = type === null || req.headers['content-length'] === '0';
  if (none && !req.operation!.bodyRequired) {
    req.body = {};
    return next();
  }
  if (type === null) {
    return next(new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is required' }]));
  }
  if (type === false) return next(new ApiError(415, 'unsupported_media_type', 'Send the body as application/json.'));
  // A required body declared JSON and empty: no JSON at all (body-parser would read it as {}).
  if (req.headers['content-length'] === '0') {
    return next(new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is empty (JSON declared)' }]));
  }
  if (declaredTooLarge(req)) return next(new ApiError(413, 'payload_too_large', 'The request body is larger than 1 MiB.'));
  // body-parser calls back from the request stream's events, outside Express's reach: anything
  // thrown here would be uncaught and end the process. It goes to next() instead, a logged 500.
  parseJson(req, res, (err?: unknown) => {
    let failure: unknown;
    try {
      failure = err ? readError(err, req) : bodyProblem(req as BodyRequest & { body: unknown });
    } catch (thrown) {
      failure = thrown;
    }
    next(failure);
  });
};

/**
 * The JSON pointer and kind of the first array or object (in document order) with more members than
 * `most`, or undefined. A loop over a stack of its own, as loneSurrogateAt's. (Exported for
 * bench/body-checks.ts, which times it.)
 */
export function oversizedAt(body: unknown, most: number): { path: string; kind: 'items' | 'properties' } | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value: body, path: '/body' }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    const keys = Object.keys(value);
    if (keys.length > most) return { path, kind: Array.isArray(value) ? 'items' : 'properties' };
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      pending.push({ value: (value as Record<string, unknown>)[key], path: pointerTo(path, key) });
    }
  }
  return undefined;
}

/**
 * What is wrong with a parsed body that the contract cannot tell, or should not be left to: a lone
 * surrogate; an array or object larger than any the contract takes (maxBodyMembers), refused before
 * the contract's check, which would walk and report each of its members (50,000 attributes held
 * the event loop for most of a second).
 */
function bodyProblem(req: BodyRequest & { body: unknown }): ApiError | undefined {
  // Walked only when the bytes hold enough commas for it (json-scan.ts): most bodies are not.
  const oversized = req.mayBeWider ? oversizedAt(req.body, maxBodyMembers) : undefined;
  if (oversized) {
    return new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: oversized.path, message: `must NOT have more than ${maxBodyMembers} ${oversized.kind} (no array or object of this API's bodies holds more)` },
    ]);
  }
  if (!req.surrogateEscapes) return undefined;
  const at = loneSurrogateAt(req.body);
  return at === undefined ? undefined : invalidText(at, 'holds a lone surrogate (an unpaired \\uD800-\\uDFFF escape)');
}
