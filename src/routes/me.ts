// Handler of GET /me: the key that makes the request, as the service sees it.
import type { Handlers } from './handler.js';

export const meHandlers: Pick<Handlers, 'getMe'> = {
  getMe({ auth, rateLimit }) {
    return Promise.resolve({
      status: 200,
      body: {
        keyId: auth.keyId,
        workspaceId: auth.workspaceId,
        plan: auth.plan,
        scopes: auth.scopes,
        rateLimit: rateLimit
          ? {
              limit: rateLimit.limit,
              remaining: rateLimit.remaining,
              // As RateLimit-Reset counts it: whole seconds, rounded up.
              resetSeconds: rateLimit.resetTime ? Math.max(0, Math.ceil((rateLimit.resetTime.getTime() - Date.now()) / 1000)) : 0,
            }
          : null,
      },
    });
  },
};
