// Meta's webhooks for a meta channel, outside /v1 and without an API key: GET is the subscription
// check, POST a delivery, signed over its raw bytes (read before any JSON parsing, at most 1 MiB).
// A client that keeps failing a channel's check is refused with 429 without waiting for its body.
// A delivery's body is read from the moment it arrives: a sender that leaves once it has sent it
// whole (its timeout) has it stored, and one that leaves before counts as no failure.
import express, { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import type { SecretBox } from '../secrets.js';
import { receiveMetaDelivery, verifyChallenge, webhookChannel } from '../channels/inbound.js';
import type { Db } from '../db/database.js';
import type { ChannelRow } from '../db/schema.js';
import { ApiError, type ErrorCode } from '../errors.js';
import type { FailedAuthLimiter } from '../middleware/rate-limit.js';

const readRaw = express.raw({ type: () => true, limit: '1mb' });

/**
 * Starts reading the request's body now, before anything is awaited: once its socket closes, bytes
 * nobody read are gone (the request is destroyed), and a delivery Meta sent whole would be checked
 * as an empty body. Rejects (a 400, never counted) when the client leaves before the body is whole.
 */
function readBody(req: Request, res: Response): Promise<Buffer> {
  const body = new Promise<Buffer>((resolve, reject) => {
    readRaw(req, res, (err?: Error) => (err ? reject(err) : resolve(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0))));
  });
  // Unread when the request is answered before it (a blocked client, an unknown channel).
  body.catch(() => {});
  return body;
}

const clientIp = (req: Request): string => req.ip ?? 'unknown';
/** The channel a client's failures are counted on; case variants of one id name one channel. */
const channelScope = (req: Request): string => String(req.params.channelId).toLowerCase();

/**
 * `failedAuth` counts bad or missing signatures and wrong verify tokens per client and channel; a
 * client that has used up its failures is refused before the channel is looked up, without waiting
 * for its body, whatever it sends. A client that leaves before its body is whole counts nothing. Meta signs every delivery, so its addresses only fail a channel whose app
 * secret is wrong, and then only on that channel.
 */
export function metaWebhooks(deps: { db: Db; secrets: SecretBox | undefined; failedAuth: FailedAuthLimiter }): Router {
  const router = Router();
  const channelOf = (req: Request, options?: { cached: boolean }): Promise<ChannelRow> => webhookChannel(deps.db, String(req.params.channelId), options);

  /** A 429 when the client has used up its failures on the channel, whatever it sends. */
  const refuseBlocked = async (req: Request, res: Response): Promise<void> => {
    const blocked = await deps.failedAuth.checkBeforeAttempt(clientIp(req), req, channelScope(req));
    if (!blocked) return;
    // Its body is not waited for: closing after the answer spares reading it to keep the connection.
    res.set('Connection', 'close');
    throw blocked;
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

  router.get('/:channelId', async (req, res) => {
    await refuseBlocked(req, res);
    const channel = await channelOf(req);
    const challenge = await counted(req, 'forbidden', () => verifyChallenge(deps.secrets, channel, req.query as Record<string, unknown>));
    res.status(200).type('text/plain').send(challenge);
  });

  router.post('/:channelId', async (req, res) => {
    const body = readBody(req, res);
    await refuseBlocked(req, res);
    // As an earlier delivery found it: confirmed with the delivery's first statement (receiveMetaDelivery).
    const channel = await channelOf(req, { cached: true });
    const raw = await body;
    // From here on the sender may be gone: its delivery is checked and stored all the same.
    await counted(req, 'invalid_signature', () => receiveMetaDelivery(deps.db, deps.secrets, channel, raw, req.get('x-hub-signature-256'), () => req.log));
    res.status(200).json({ received: true });
  });

  // Any answer given before the body arrived (an unknown channel, a blocked client, the database
  // away) closes the connection: Node would otherwise read the rest of the body to keep it open.
  const closeUnread: ErrorRequestHandler = (err, req, res, next) => {
    if (!req.complete) res.set('Connection', 'close');
    next(err);
  };
  router.use(closeUnread);
  return router;
}
