// Contract validation (step 6 of openapi.yaml's "Order of checks"): express-openapi-validator over the
// contract, configured once for the service and for the mock, so both answer a request alike.
import type { RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { loadSpec } from '../contract.js';

/**
 * A UUID in its 36-character form. ajv-formats' `uuid` also takes a `urn:uuid:` prefix, which
 * PostgreSQL does not: the contract's `format: uuid` means this one.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function contractValidator(options: { validateResponses: boolean }): RequestHandler[] {
  return OpenApiValidator.middleware({
    apiSpec: loadSpec() as never,
    validateRequests: { allowUnknownQueryParameters: false, allErrors: true },
    validateResponses: options.validateResponses,
    validateSecurity: false,
    validateApiSpec: false,
    ignoreUndocumented: false,
    ajvFormats: { mode: 'full' },
    formats: { uuid: UUID },
    fileUploader: false,
  } as never) as RequestHandler[];
}
