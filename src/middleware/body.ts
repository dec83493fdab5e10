// The body (DECISIONS §3.5): only operations with a body read one; it must be application/json in
// UTF-8 (415), well-formed (400 invalid_json) and at most 1 MiB (413).
import express, { type RequestHandler } from 'express';
import { ApiError } from '../errors.js';

// Not strict: a JSON scalar is valid JSON that breaks the contract (400 validation_error), not broken JSON.
const parseJson = express.json({ limit: '1mb', strict: false, type: 'application/json' });

export const jsonBody: RequestHandler = (req, res, next) => {
  if (!req.operation!.hasBody) return next();
  const type = req.is('application/json');
  if (type === null) {
    // No body at all: every body of the contract is required.
    return next(new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body', message: 'is required' }]));
  }
  if (type === false) return next(new ApiError(415, 'unsupported_media_type', 'Send the body as application/json.'));
  parseJson(req, res, next);
};
