// Meta channels for tests: made through the API with settings unique to the test, and webhook
// deliveries signed and posted to them as Meta would.
import { randomBytes, randomInt } from 'node:crypto';
import type { components } from '../../generated/api.js';
import { request, type RawResponse, type TestWorkspace } from './api.js';
import { metaSignature } from './graph.js';
import type { TestServer } from './server.js';

type Channel = components['schemas']['Channel'];

export interface MetaChannel {
  channel: Channel;
  externalId: string;
  accessToken: string;
  appSecret: string;
  verifyToken: string;
}

let sequence = 0;
const digits = (n: number, width: number): string => String(n).padStart(width, '0');

export async function createMetaChannel(ws: TestWorkspace, type: 'whatsapp' | 'instagram'): Promise<MetaChannel> {
  const settings = {
    // Unique across test files too: an account connects to one channel of all workspaces.
    externalId: `${type === 'whatsapp' ? '1065' : '1784'}${digits(Date.now() % 1e9, 9)}${digits(sequence++ % 1e4, 4)}${digits(randomInt(1e6), 6)}`,
    accessToken: `EAA${randomBytes(16).toString('hex')}`,
    appSecret: randomBytes(16).toString('hex'),
    verifyToken: `verify-${randomBytes(6).toString('hex')}`,
  };
  const { data, response } = await ws.api.POST('/channels', {
    body: { type, name: type === 'whatsapp' ? 'WhatsApp Vendas' : 'Instagram Loja', provider: 'meta', meta: settings },
  });
  if (response.status !== 201) throw new Error(`creating a meta channel: ${response.status}`);
  return { channel: data!, ...settings };
}

/** Posts a delivery to the channel's webhook, signed with `appSecret` (or with the `signature` given). */
export async function postWebhook(
  server: Pick<TestServer, 'baseUrl'>,
  channelId: string,
  payload: unknown,
  options: { appSecret?: string; signature?: string | null; rawBody?: string | Buffer } = {},
): Promise<RawResponse> {
  const body = options.rawBody ?? JSON.stringify(payload);
  const signature = options.signature === undefined ? metaSignature(options.appSecret ?? '', body) : options.signature;
  return request(server, 'POST', `/webhooks/meta/${channelId}`, {
    headers: { 'content-type': 'application/json', ...(signature !== null && { 'x-hub-signature-256': signature }) },
    rawBody: body,
  });
}
