// Matches a /v1 request to its contract operation before anything else runs (DECISIONS §3.1):
// an unknown path is a 404, a known path with another method a 405.
import { Router, type RequestHandler } from 'express';
import { contractOperations, type Operation } from '../contract.js';
import { ApiError } from '../errors.js';

const paramCount = (path: string): number => (path.match(/\{/g) ?? []).length;

export function operationRouter(): Router {
  const router = Router({ caseSensitive: true });
  const byPath = new Map<string, Operation[]>();
  for (const op of contractOperations) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  // Literal paths before parameterised ones: /threads/stats/nps must not be read as /threads/{id}.
  const paths = [...byPath.keys()].sort((a, b) => paramCount(a) - paramCount(b));
  for (const path of paths) {
    const ops = byPath.get(path)!;
    const route = router.route(ops[0]!.expressPath);
    for (const op of ops) {
      route[op.method]((req, _res, next) => {
        req.operation = op;
        next('router');
      });
    }
    const allow = ops.map((op) => op.method.toUpperCase()).join(', ');
    route.all((req, _res, next) => {
      next(
        new ApiError(405, 'method_not_allowed', `${req.method} is not allowed on this path; use ${allow}.`, undefined, {
          Allow: allow,
        }),
      );
    });
  }
  return router;
}

/** Ends requests that no operation matched with a 404. */
export const requireOperation: RequestHandler = (req, _res, next) => {
  next(req.operation ? undefined : pathNotFound());
};

export const pathNotFound = (): ApiError => new ApiError(404, 'not_found', 'No such endpoint.');
