// The body (DECISIONS §3.5): only operations with a body read one; it must be application/json in
// UTF-8 (415), well-formed (400 invalid_json) and at most 1 MiB (413).
import express, { type RequestHandler } from 'express';
import { ApiError } from '../errors.js';

// Not strict: a JSON scalar is valid JSON that breaks the contract (400 validation_error), not broken JSON.
const parseJson = express.json({ limit: '1mb', strict: false, type: 'application/json' });

export const jsonBody: RequestHandler = (req, res, next) => {
  if (!req.operation!.hasBody) return next();
  // req.is() answers null when there is no body at all: the contract check then reports it missing.
  const type = req.is('application/json');
  if (type === false) return next(new ApiError(415, 'unsupported_media_type', 'Send the body as application/json.'));
  parseJson(req, res, next);
};
