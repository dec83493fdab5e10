// What the middleware adds to Express' request.
import type { OpenApiRequestMetadata } from 'express-openapi-validator/dist/framework/types.js';
import type { Logger } from 'pino';
import type { Operation } from './contract.js';
import type { AuthContext } from './middleware/authenticate.js';
import type { Upload } from './media/upload.js';

declare module 'express-serve-static-core' {
  interface Request {
    id: string;
    log: Logger;
    operation?: Operation;
    auth?: AuthContext;
    /** Set by express-openapi-validator: the matched operation and its path parameters. */
    openapi?: OpenApiRequestMetadata;
    /** A raw body (POST /media), spooled to disk by the upload middleware. */
    upload?: Upload;
    /** A HEAD request, checked by the contract's validator as its GET (middleware/validator.ts). */
    headRequest?: boolean;
  }
}
