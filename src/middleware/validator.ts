// Contract validation (step 6 of openapi.yaml's "Order of checks"): express-openapi-validator over the
// contract, configured once for the service and for the mock, so both answer a request alike. A
// query with invalid percent-encoding is refused first: the parser would keep it as text.
import type { RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { loadSpec, type Operation } from '../contract.js';
import { ApiError } from '../errors.js';
import { badlyEncodedParameter } from '../query.js';
import { installValidatorShortcuts } from './validator-shortcuts.js';

/**
 * A UUID in its 36-character form. ajv-formats' `uuid` also takes a `urn:uuid:` prefix, which
 * PostgreSQL does not: the contract's `format: uuid` means this one.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The contract as the validator reads it: Ajv's `discriminator` (which checks a tagged union's one
 * branch, so an error names that branch's fields instead of every branch's) takes each branch's
 * tag values from its `const` or `enum` and refuses OpenAPI's `mapping`, which the contract keeps
 * for client generators (the same values, spelled out).
 */
function withoutDiscriminatorMappings(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutDiscriminatorMappings);
  if (typeof node !== 'object' || node === null) return node;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'discriminator' && typeof value === 'object' && value !== null && 'propertyName' in value) {
      copy[key] = { propertyName: (value as { propertyName: unknown }).propertyName };
    } else {
      copy[key] = withoutDiscriminatorMappings(value);
    }
  }
  return copy;
}

/** 400 for a query parameter whose percent-encoding is invalid; the validator would see it as text. */
const percentEncodingCheck: RequestHandler = (req, _res, next) => {
  const url = req.originalUrl;
  const start = url.indexOf('?');
  const parameter = start === -1 ? undefined : badlyEncodedParameter(url.slice(start + 1));
  if (parameter === undefined) return next();
  next(
    new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: `/query/${parameter}`, message: 'has invalid percent-encoding' },
    ]),
  );
};

/**
 * A 400 naming the first path parameter whose percent-encoding is invalid (`/contacts/%ZZ`), as a
 * query's is (validator.ts); undefined when all decode. The validator would answer it unnamed.
 */
function badlyEncodedPathParameter(op: Operation, path: string): ApiError | undefined {
  const names = op.path.split('/').slice(1);
  const segments = path.split('/').slice(1);
  for (let i = 0; i < names.length; i++) {
    const name = /^\{(\w+)\}$/.exec(names[i]!)?.[1];
    if (name === undefined || !segments[i]!.includes('%')) continue;
    try {
      decodeURIComponent(segments[i]!);
    } catch {
      return new ApiError(400, 'validation_error', 'The request does not match the contract.', [
        { path: `/params/${name}`, message: 'has invalid percent-encoding' },
      ]);
    }
  }
  return undefined;
}

/** 400 for a path parameter whose percent-encoding is invalid. */
const pathEncodingCheck: RequestHandler = (req, _res, next) => next(req.path.includes('%') ? badlyEncodedPathParameter(req.operation!, req.path) : undefined);

/**
 * HEAD is GET without the body (RFC 9110 §9.3.2): the contract declares GET alone, so the validator
 * checks a HEAD request as its GET (and Node leaves the answer's body out, whatever is written).
 * The method is HEAD again after it, for the handlers that answer HEAD themselves (the stream).
 */
const headAsGet: RequestHandler = (req, _res, next) => {
  if (req.method === 'HEAD') {
    req.method = 'GET';
    req.headRequest = true;
  }
  next();
};
const headRestored: RequestHandler = (req, _res, next) => {
  if (req.headRequest) req.method = 'HEAD';
  next();
};

/**
 * The validator's middleware, made once per process for each setting: it reads the contract and
 * compiles each operation's schemas on that operation's first request, work every app of the process
 * (several in one test file, or one per test file in a worker) shares instead of redoing. It keeps no
 * state of its own app: the path parameters it would install with app.param are read by no route here
 * (the API's routes are dispatched from the contract's operations, src/routes/handler.ts).
 */
const validators = new Map<boolean, RequestHandler[]>();

export function contractValidator(options: { validateResponses: boolean }): RequestHandler[] {
  let validator = validators.get(options.validateResponses);
  if (!validator) {
    validator = compileValidator(options);
    validators.set(options.validateResponses, validator);
  }
  return [percentEncodingCheck, pathEncodingCheck, headAsGet, ...validator, headRestored];
}

/** express-openapi-validator's options: the service's and the mock's (the contract as the validator reads it). */
export function validatorOptions(options: { validateResponses: boolean }): Record<string, unknown> {
  return {
    apiSpec: withoutDiscriminatorMappings(loadSpec()),
    validateRequests: { allowUnknownQueryParameters: false, allErrors: true, discriminator: true },
    validateResponses: options.validateResponses,
    validateSecurity: false,
    validateApiSpec: false,
    ignoreUndocumented: false,
    ajvFormats: { mode: 'full' },
    formats: { uuid: UUID },
    fileUploader: false,
  };
}

function compileValidator(options: { validateResponses: boolean }): RequestHandler[] {
  // What it would do on reading the contract that changes nothing here: skipped (validator-shortcuts.ts).
  installValidatorShortcuts();
  return OpenApiValidator.middleware(validatorOptions(options) as never) as RequestHandler[];
}
