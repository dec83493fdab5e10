// Meta's webhooks for a meta channel, outside /v1 and without an API key: GET is the subscription
// check, POST a delivery, signed over its raw bytes (read before any JSON parsing, at most 1 MiB).
// A client that keeps failing a channel's check is refused with 429 before its body is read.
import express, { Router, type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import type { AiReplies } from '../ai/replies.js';
import type { SecretBox } from '../channels/secrets.js';
import { receiveMetaDelivery, verifyChallenge, webhookChannel } from '../channels/inbound.js';
import type { Db } from '../db/database.js';
import type { ChannelRow } from '../db/schema.js';
import { ApiError, type ErrorCode } from '../errors.js';
import type { FailedAuthLimiter } from '../middleware/rate-limit.js';

const readRaw = express.raw({ type: () => true, limit: '1mb' });

const clientIp = (req: Request): string => req.ip ?? 'unknown';
/** The channel a client's failures are counted on; case variants of one id name one channel. */
const channelScope = (req: Request): string => String(req.params.channelId).toLowerCase();

/**
 * `failedAuth` counts bad or missing signatures and wrong verify tokens per client and channel; a
 * client that has used up its failures is refused before the channel is looked up or its body read,
 * whatever it sends. Meta signs every delivery, so its addresses only fail a channel whose app
 * secret is wrong, and then only on that channel.
 */
export function metaWebhooks(deps: { db: Db; secrets: SecretBox | undefined; ai?: AiReplies | undefined; failedAuth: FailedAuthLimiter }): Router {
  const router = Router();
  const channelOf = (req: Request): Promise<ChannelRow> => webhookChannel(deps.db, String(req.params.channelId));

  const refuseBlocked: RequestHandler = async (req, res, next) => {
    const blocked = await deps.failedAuth.checkBeforeAttempt(clientIp(req), req, channelScope(req));
    if (!blocked) return next();
    // Its body is never read: closing after the answer spares reading it to keep the connection.
    res.set('Connection', 'close');
    next(blocked);
  };

  /** Runs the channel's check; its failure (`code`) is counted, and one past the limit (a request that raced past refuseBlocked) is a 429. */
  const counted = async <T>(req: Request, code: ErrorCode, check: () => T | Promise<T>): Promise<T> => {
    try {
      return await check();
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== code) throw err;
      throw (await deps.failedAuth.recordFailure(clientIp(req), req.log, channelScope(req))) ?? err;
    }
  };

  router.get('/:channelId', refuseBlocked, async (req, res) => {
    const channel = await channelOf(req);
    const challenge = await counted(req, 'forbidden', () => verifyChallenge(deps.secrets, channel, req.query as Record<string, unknown>));
    res.status(200).type('text/plain').send(challenge);
  });

  router.post(
    '/:channelId',
    refuseBlocked,
    async (req, res, next) => {
      res.locals.channel = await channelOf(req);
      next();
    },
    readRaw,
    async (req, res) => {
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      await counted(req, 'invalid_signature', () =>
        receiveMetaDelivery(deps.db, deps.secrets, res.locals.channel as ChannelRow, raw, req.get('x-hub-signature-256'), req.log, deps.ai),
      );
      res.status(200).json({ received: true });
    },
  );

  // Any answer given before the body arrived (an unknown channel, a blocked client, the database
  // away) closes the connection: Node would otherwise read the rest of the body to keep it open.
  const closeUnread: ErrorRequestHandler = (err, req, res, next) => {
    if (!req.complete) res.set('Connection', 'close');
    next(err);
  };
  router.use(closeUnread);
  return router;
}
