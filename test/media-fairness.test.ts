// Bounds on fetching customers' files (issue 31): a download that trickles
// bytes forever (never idle long enough for the idle limit) fails at MEDIA_FETCH_TIMEOUT_MS, each
// attempt, and ends failed; and one workspace, or one host, never holds more than half the fetch
// slots, so eight trickling files leave another workspace's photo to be stored at once.
import { createHash, randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createWorkspace, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { instagramAttachments, instagramDelivery, whatsappDelivery, whatsappMedia } from './helpers/graph.js';
import { startMediaService, type MediaService } from './helpers/media.js';
import { closeServer, listenOnLoopback, waitFor } from './helpers/processes.js';
import { waitForNoJobs } from './helpers/queue.js';

type Message = components['schemas']['Message'];

/** A file host that answers every GET with a large Content-Length, then one byte every 100 ms, forever. */
class DripHost {
  /** Downloads started, and those still open. */
  started = 0;
  open = 0;
  private constructor(
    private readonly server: Server,
    readonly origin: string,
  ) {}

  static async start(): Promise<DripHost> {
    const host: DripHost = new DripHost(...(await DripHost.listen(() => host)));
    return host;
  }

  private static async listen(self: () => DripHost): Promise<[Server, string]> {
    const { server, origin } = await listenOnLoopback(async (_req, res) => {
      const host = self();
      host.started++;
      host.open++;
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 4 * 2 ** 20 });
      const timer = setInterval(() => res.write(Buffer.from([0xff])), 100);
      res.on('close', () => {
        clearInterval(timer);
        host.open--;
      });
    });
    return [server, origin];
  }

  url(): string {
    return `${this.origin}/cdn/${randomBytes(8).toString('hex')}.jpg`;
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
let sequence = 0;
const customer = (): string => `7412${Date.now() % 1e6}${sequence++}`;

async function messagesOf(ws: TestWorkspace): Promise<Message[]> {
  const { data: threads } = await ws.api.GET('/threads');
  const all: Message[] = [];
  for (const thread of threads!.data) {
    const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: thread.id } } });
    all.push(...data!.data);
  }
  return all;
}

/** A workspace whose Instagram customer sends `count` files, each from `host`. */
async function trickling(service: MediaService, host: DripHost, count: number): Promise<TestWorkspace> {
  const ws = await createWorkspace(service.server);
  const meta = await createMetaChannel(ws, 'instagram');
  const files = Array.from({ length: count }, () => ({ type: 'image', url: host.url() }));
  const { event } = instagramAttachments(meta.externalId, customer(), files);
  expect((await postWebhook(service.server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret })).status).toBe(200);
  return ws;
}

describe('a download past MEDIA_FETCH_TIMEOUT_MS', () => {
  let service: MediaService;
  let drip: DripHost;
  beforeAll(async () => {
    drip = await DripHost.start();
    service = await startMediaService('media-deadline', { mediaFetchTimeoutMs: 1_000, retryMaxAttempts: 2 });
  });
  afterAll(async () => {
    await drip?.close();
    await service?.close();
  });

  it('when a host trickles bytes forever, then each attempt ends at the deadline and the file ends failed', async () => {
    const started = Date.now();
    const ws = await trickling(service, drip, 1);

    await waitForNoJobs(service.server.db, ws.workspaceId, 'media-fetch', 15_000);

    const [message] = await messagesOf(ws);
    expect(message!.attachments).toEqual([expect.objectContaining({ type: 'image', status: 'failed', size: null })]);
    expect(drip.started).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    await waitFor('the trickles closed', () => drip.open === 0);
  });
});

describe('fetch slots shared fairly', () => {
  let service: MediaService;
  beforeAll(async () => {
    service = await startMediaService('media-fairness');
  });
  afterAll(() => service?.close());

  /** Another workspace's WhatsApp photo, from the Graph double (another host): stored within `ms`. */
  async function photoStoredWithin(ms: number): Promise<void> {
    const ws = await createWorkspace(service.server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const bytes = randomBytes(4_000);
    const mediaId = service.graph.addMedia({ bytes, mimeType: 'image/jpeg' });
    const inbound = whatsappMedia(`55119${String(Date.now() % 1e8).padStart(8, '0')}`, 'image', { id: mediaId, mimeType: 'image/jpeg', sha256: sha256(bytes) });

    expect((await postWebhook(service.server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret })).status).toBe(200);
    await waitFor('the message stored', async () => (await messagesOf(ws)).length === 1);
    await waitForNoJobs(service.server.db, ws.workspaceId, 'media-fetch', ms);

    const [message] = await messagesOf(ws);
    expect(message!.attachments).toEqual([expect.objectContaining({ type: 'image', status: 'stored', size: 4_000, sha256: sha256(bytes) })]);
  }

  /** Ends the trickles (their host goes away) and waits until the workspaces' files are settled. */
  async function endTrickles(host: DripHost, workspaces: TestWorkspace[]): Promise<void> {
    await host.close();
    for (const ws of workspaces) await waitForNoJobs(service.server.db, ws.workspaceId, 'media-fetch', 30_000);
  }

  it("when one workspace's 8 files trickle from one host, then it holds 4 of the 8 slots and another workspace's photo is stored at once", async () => {
    const drip = await DripHost.start();
    const slow = await trickling(service, drip, 8);
    await waitFor('four trickles running', () => drip.open === 4);

    await photoStoredWithin(5_000);

    expect(drip.open).toBe(4);
    await endTrickles(drip, [slow]);
  });

  it("when two workspaces' files trickle from one host, then the host holds 4 of the 8 slots and a third workspace's photo is stored at once", async () => {
    const drip = await DripHost.start();
    const slow = [await trickling(service, drip, 4), await trickling(service, drip, 4)];
    await waitFor('four trickles running', () => drip.open === 4);

    await photoStoredWithin(5_000);

    expect(drip.open).toBe(4);
    await endTrickles(drip, slow);
  });
});
