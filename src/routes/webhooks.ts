// Meta's webhooks for a meta channel, outside /v1 and without an API key: GET is the subscription
// check, POST a delivery, signed over its raw bytes (read before any JSON parsing, at most 1 MiB).
import express, { Router, type Request } from 'express';
import type { AiReplies } from '../ai/replies.js';
import type { SecretBox } from '../channels/secrets.js';
import { receiveMetaDelivery, verifyChallenge, webhookChannel } from '../channels/inbound.js';
import type { Db } from '../db/database.js';
import type { ChannelRow } from '../db/schema.js';

const readRaw = express.raw({ type: () => true, limit: '1mb' });

export function metaWebhooks(deps: { db: Db; secrets: SecretBox | undefined; ai?: AiReplies | undefined }): Router {
  const router = Router();
  const channelOf = (req: Request): Promise<ChannelRow> => webhookChannel(deps.db, String(req.params.channelId));

  router.get('/:channelId', async (req, res) => {
    const channel = await channelOf(req);
    const challenge = verifyChallenge(deps.secrets, channel, req.query as Record<string, unknown>);
    res.status(200).type('text/plain').send(challenge);
  });

  router.post(
    '/:channelId',
    async (req, res, next) => {
      res.locals.channel = await channelOf(req);
      next();
    },
    readRaw,
    async (req, res) => {
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      await receiveMetaDelivery(deps.db, deps.secrets, res.locals.channel as ChannelRow, raw, req.get('x-hub-signature-256'), req.log, deps.ai);
      res.status(200).json({ received: true });
    },
  );
  return router;
}
