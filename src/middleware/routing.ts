// Matches a /v1 request to its contract operation before anything else runs (step 1 of openapi.yaml's
// "Order of checks"): an unknown path is a 404, a known path with another method a 405. A table
// lookup by segments (literal segments beat parameters, so /threads/stats/nps is never /threads/{id}).
import type { RequestHandler } from 'express';
import { contractOperations, type Operation } from '../contract.js';
import { ApiError } from '../errors.js';

interface Route {
  segments: Array<string | null>; // null: a parameter
  byMethod: Map<string, Operation>;
  allow: string;
}

function buildRoutes(): Route[] {
  const byPath = new Map<string, Operation[]>();
  for (const op of contractOperations) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  const routes = [...byPath].map(([path, ops]) => ({
    segments: path
      .split('/')
      .slice(1)
      .map((s) => (s.startsWith('{') ? null : s)),
    byMethod: new Map(
      ops.flatMap((op) =>
        op.method === 'get'
          ? [
              ['GET', op],
              ['HEAD', op],
            ]
          : [[op.method.toUpperCase(), op]],
      ),
    ),
    allow: ops.map((op) => op.method.toUpperCase()).join(', '),
  }));
  const params = (r: Route): number => r.segments.filter((s) => s === null).length;
  return routes.sort((a, b) => params(a) - params(b));
}

function matches(route: Route, segments: string[]): boolean {
  return route.segments.length === segments.length && route.segments.every((s, i) => s === null || s === segments[i]);
}

export const pathNotFound = (): ApiError => new ApiError(404, 'not_found', 'No such endpoint.');

/** Sets req.operation for a /v1 request (mounted at /v1), or ends it with 404 or 405. */
export function matchOperation(): RequestHandler {
  const routes = buildRoutes();
  return (req, _res, next) => {
    // req.path is relative to the /v1 mount. Exact, as the contract writes it: a trailing slash
    // (an empty last segment) is another path, a 404, as /V1 is.
    const segments = req.path.split('/').slice(1);
    const route = routes.find((r) => matches(r, segments));
    if (!route || segments.some((s) => s === '')) return next(pathNotFound());
    const op = route.byMethod.get(req.method);
    if (!op) {
      return next(
        new ApiError(405, 'method_not_allowed', `${req.method} is not allowed on this path; use ${route.allow}.`, undefined, {
          Allow: route.allow,
        }),
      );
    }
    req.operation = op;
    next();
  };
}
