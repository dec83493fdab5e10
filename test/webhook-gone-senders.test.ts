// Meta's webhooks when the sender leaves before the answer (its timeout): a delivery received whole
// and correctly signed is stored once, and a sender that leaves, whole or halfway, never counts as a
// failed check, so it never gets the channel's webhook refused with 429.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPhone, createWorkspace, request } from './helpers/api.js';
import { createMetaChannel, type MetaChannel } from './helpers/channels.js';
import { metaSignature, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { LogCapture, waitFor } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

const LIMIT = 3;
const SENDERS = 3 * LIMIT + 1;

let server: TestServer;
const logs = new LogCapture();
beforeAll(async () => {
  // The failed checks are counted in the run's Redis when there is one, as in production.
  server = await startServer({ logs: logs.destination, config: { failedAuthLimit: LIMIT, trustProxy: 'loopback' } });
});
afterAll(async () => {
  await server.close();
});

let ipSequence = 0;
const newClientIp = (): string => `198.51.100.${(ipSequence++ % 250) + 1}`;

/** A signed WhatsApp text delivery to the channel: its bytes, signature and message id. */
function signedDelivery(meta: MetaChannel): { body: string; signature: string; messageId: string } {
  const inbound = whatsappText(buildPhone().slice(1), 'Oi! Meu pedido 4521 ainda não chegou.', 'Mariana Silva');
  const body = JSON.stringify(whatsappDelivery(meta.externalId, inbound));
  return { body, signature: metaSignature(meta.appSecret, body), messageId: inbound.id };
}

/**
 * POSTs `body` to the channel's webhook over a socket of its own, sending only its first `sentBytes`
 * bytes, and closes the socket as soon as they are written, before any answer. Resolves once closed.
 */
function sendAndLeave(channelId: string, ip: string, requestId: string, body: string, signature: string, sentBytes = Buffer.byteLength(body)): Promise<void> {
  const { hostname, port } = new URL(server.baseUrl);
  const bytes = Buffer.from(body);
  const head =
    `POST /webhooks/meta/${channelId} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${bytes.length}\r\nX-Hub-Signature-256: ${signature}\r\nX-Forwarded-For: ${ip}\r\nX-Request-Id: ${requestId}\r\n\r\n`;
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(Buffer.concat([Buffer.from(head), bytes.subarray(0, sentBytes)]), () => socket.destroy());
    });
    socket.on('error', () => {});
    socket.once('close', () => resolve());
  });
}

const storedMessageIds = async (meta: MetaChannel): Promise<string[]> =>
  (await server.db.selectFrom('messages').select('external_id').where('channel_id', '=', meta.channel.id).execute()).map((m) => m.external_id!);

const postSigned = (meta: MetaChannel, ip: string) => {
  const { body, signature, messageId } = signedDelivery(meta);
  return request(server, 'POST', `/webhooks/meta/${meta.channel.id}`, {
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature, 'x-forwarded-for': ip },
    rawBody: body,
  }).then((res) => ({ res, messageId }));
};

describe('POST /webhooks/meta/{channelId} from senders that leave before the answer', () => {
  it('when senders send whole, correctly signed deliveries and close the connection at once, then each is stored once and none counts as a failure', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();
    const deliveries = Array.from({ length: SENDERS }, () => signedDelivery(meta));

    await Promise.all(deliveries.map((d, i) => sendAndLeave(meta.channel.id, ip, `gone-whole-${ip}-${i}`, d.body, d.signature)));
    await waitFor(`${SENDERS} deliveries stored`, async () => (await storedMessageIds(meta)).length >= SENDERS);
    const next = await postSigned(meta, ip);

    expect(next.res.status).toBe(200);
    const stored = await storedMessageIds(meta);
    expect(stored.sort()).toEqual([...deliveries.map((d) => d.messageId), next.messageId].sort());
  });

  it('when senders leave halfway through their body, signed well or badly, then nothing is stored, nothing counts, and their next delivery is stored', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const ip = newClientIp();
    const requestIds = Array.from({ length: SENDERS }, (_, i) => `gone-half-${ip}-${i}`);

    await Promise.all(
      requestIds.map((requestId, i) => {
        const { body, signature } = signedDelivery(meta);
        const sent = i % 2 === 0 ? signature : `sha256=${'0'.repeat(64)}`;
        return sendAndLeave(meta.channel.id, ip, requestId, body, sent, Math.floor(Buffer.byteLength(body) / 2));
      }),
    );
    // Each request is done with once its access line is written.
    await waitFor('an access line for every sender that left', () => requestIds.every((id) => logs.lines.some((l) => l.reqId === id && l.msg === 'request')));
    const next = await postSigned(meta, ip);

    expect(next.res.status).toBe(200);
    expect(await storedMessageIds(meta)).toEqual([next.messageId]);
  });
});
