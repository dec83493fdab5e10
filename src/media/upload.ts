// An upload's body (POST /media): its Content-Type must be a type the service takes (415) and its
// declared Content-Length within that type's limit (413), both before a byte is read; then, after
// the contract's checks, the body is spooled to disk with its SHA-256, cut off at the limit (a
// chunked body that passes it is a 413 too), and a body that ends early stores nothing.
import fs from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { ApiError } from '../errors.js';
import type { MediaType } from '../db/schema.js';
import type { MediaStore } from './store.js';
import { bareMimeType, MEDIA_LIMITS, mediaTypeOf } from './types.js';
import { CutShortError, spool, TooLargeError, type Spooled } from './spool.js';

/** A spooled upload; the request's `body` is its facts (what an Idempotency-Key compares). */
export interface Upload extends Spooled {
  type: MediaType;
  mimeType: string;
}

const MB = 2 ** 20;
const limitText = (bytes: number): string => (bytes >= MB ? `${bytes / MB} MB` : `${bytes / 1024} KB`);

function tooLarge(type: MediaType): ApiError {
  // Nothing more is stored: the error handler drops the rest of the body (within its limits) after the answer.
  return new ApiError(413, 'payload_too_large', `A ${type} may have at most ${limitText(MEDIA_LIMITS[type])} (1 MB = 2^20 bytes).`);
}

/** What is wrong with an upload's headers (415, 413, 400), before its body is read; undefined when nothing. */
export function uploadProblem(req: IncomingMessage): ApiError | undefined {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return new ApiError(415, 'unsupported_media_type', 'Send the file as it is, without Content-Encoding.');
  }
  const type = mediaTypeOf(req.headers['content-type']);
  if (!type) {
    return new ApiError(
      415,
      'unsupported_media_type',
      `Files of type ${bareMimeType(req.headers['content-type']) ?? '(none)'} are not taken; see POST /media for the types (image/jpeg, image/png, image/webp, audio/aac, audio/mp4, audio/mpeg, audio/amr, audio/ogg, video/mp4, video/3gpp, PDF, text, Office).`,
    );
  }
  const declared = req.headers['content-length'];
  if (declared === undefined && req.headers['transfer-encoding'] === undefined) {
    return new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is required' }]);
  }
  if (declared !== undefined && Number(declared) > MEDIA_LIMITS[type]) return tooLarge(type);
  if (declared === '0') return new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is empty' }]);
  return undefined;
}

/**
 * Spools the body of a raw-body operation (after the contract's checks) and sets `req.upload`, and
 * `req.body` to its facts. The spooled file is removed when the response ends, unless the handler
 * moved it into the store.
 */
export function spoolUpload(media: MediaStore): RequestHandler {
  return (req, res, next) => {
    if (!req.operation!.rawBody) return next();
    const type = mediaTypeOf(req.headers['content-type'])!;
    const mimeType = bareMimeType(req.headers['content-type'])!;
    spool(req, media.spoolDir, MEDIA_LIMITS[type]).then(
      (spooled) => {
        res.once('close', () => fs.rm(spooled.path, { force: true }, () => undefined));
        if (spooled.size === 0) {
          return next(new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is empty' }]));
        }
        req.upload = { ...spooled, type, mimeType };
        req.body = { mimeType, size: spooled.size, sha256: spooled.sha256, filename: (req.query as { filename?: string }).filename ?? null };
        next();
      },
      (err: unknown) => {
        if (err instanceof TooLargeError) return next(tooLarge(type));
        if (err instanceof CutShortError) return next(new ApiError(400, 'validation_error', 'The upload ended before its end; nothing was stored.'));
        next(err);
      },
    );
  };
}
