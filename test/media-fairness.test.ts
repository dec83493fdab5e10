// Bounds on fetching customers' files (issue 31): a download that trickles
// bytes forever (never idle long enough for the idle limit) fails at MEDIA_FETCH_TIMEOUT_MS, each
// attempt, and ends failed; a download cut before its bytes are spooled (the idle limit passing
// while the file system's threads are busy) is a failed attempt too, never a fetch slot held for
// good; and one workspace, or one host, never holds more than half the fetch slots, so eight
// trickling files leave another workspace's photo to be stored at once.
// The trickles are closed after each group, whatever happened, and a failed test prints the jobs
// left and the downloads still open, so a stall says where it was.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { Server, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { components } from '../generated/api.js';
import { createWorkspace, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { instagramAttachments, instagramDelivery, whatsappDelivery, whatsappMedia } from './helpers/graph.js';
import { startMediaService, type MediaService } from './helpers/media.js';
import { closeServer, listenOnLoopback, sleep, waitFor } from './helpers/processes.js';
import { waitForNoJobs } from './helpers/queue.js';

type Message = components['schemas']['Message'];

/** A file host that answers every GET with a large Content-Length, then one byte every 100 ms, forever. */
class DripHost {
  /** Every host started and not closed yet, to be closed after its group whatever happened. */
  static readonly hosts: DripHost[] = [];
  /**
   * Downloads started, and the most open at once: what a share allows, checked all along (the count
   * open now may dip for a moment where, on a loaded machine, the idle limit cut and restarted one).
   */
  started = 0;
  most = 0;
  /** The downloads still open: their path and when they began. */
  private readonly downloads = new Map<ServerResponse, { path: string; since: number }>();
  private constructor(
    private readonly server: Server,
    readonly origin: string,
  ) {}

  static async start(): Promise<DripHost> {
    const host: DripHost = new DripHost(...(await DripHost.listen(() => host)));
    DripHost.hosts.push(host);
    return host;
  }

  private static async listen(self: () => DripHost): Promise<[Server, string]> {
    const { server, origin } = await listenOnLoopback(async (req, res) => {
      const host = self();
      host.started++;
      host.downloads.set(res, { path: req.url ?? '', since: Date.now() });
      host.most = Math.max(host.most, host.downloads.size);
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 4 * 2 ** 20 });
      const timer = setInterval(() => res.write(Buffer.from([0xff])), 100);
      res.on('close', () => {
        clearInterval(timer);
        host.downloads.delete(res);
      });
    });
    return [server, origin];
  }

  get open(): number {
    return this.downloads.size;
  }

  url(): string {
    return `${this.origin}/cdn/${randomBytes(8).toString('hex')}.jpg`;
  }

  /** What a failure report says of it: its downloads still open, and for how long. */
  report(): string {
    const open = [...this.downloads.values()].map((d) => `${d.path} (${Date.now() - d.since} ms)`);
    return `${this.origin}: ${this.started} started, ${open.length} open${open.length > 0 ? `: ${open.join(', ')}` : ''}`;
  }

  /** Ends its downloads and stops answering (again: no harm). */
  close(): Promise<void> {
    return closeServer(this.server);
  }

  /** Closes every host started so far. */
  static closeAll(): Promise<void> {
    return Promise.all(DripHost.hosts.splice(0).map((host) => host.close())).then(() => undefined);
  }
}

/**
 * On a failed test: the step it was at, the fetch jobs stored (a running one shows its lease), what
 * the service's workers run, and each host's downloads still open.
 */
function reportOnFailure(service: () => MediaService): { step: (name: string) => void } {
  let step = 'starting';
  onTestFailed(async () => {
    const { db } = service().server;
    const rows = await Promise.race([
      db
        .selectFrom('jobs')
        .select(['workspace_id', 'id', 'attempts', 'run_at', 'locked_by', 'locked_until', 'last_error'])
        .where('queue', '=', 'media-fetch')
        .orderBy('workspace_id')
        .orderBy('run_at')
        .execute()
        .then(
          (found) => JSON.stringify(found, null, 1),
          (err: unknown) => `could not be read: ${(err as Error).message}`,
        ),
      sleep(5_000).then(() => 'could not be read within 5 s'),
    ]);
    console.error(
      [
        `failed at: ${step}`,
        `media-fetch jobs stored: ${rows}`,
        `jobs running: ${runningJobs(service())}`,
        `downloads: ${DripHost.hosts.map((host) => host.report()).join('; ') || 'no host open'}`,
      ].join('\n'),
    );
  });
  return {
    step: (name) => {
      step = name;
    },
  };
}

/**
 * Ends every trickle, then stops the service: within `ms`, or fails saying which workers still run
 * jobs (a run deaf to its abort holds the worker's stop), instead of the hook's own timeout.
 */
async function closeAfterTrickles(service: MediaService | undefined, ms = 20_000): Promise<void> {
  await DripHost.closeAll();
  if (!service) return;
  const late = await Promise.race([service.close().then(() => false), sleep(ms).then(() => true)]);
  if (late) throw new Error(`the service did not stop within ${ms} ms; jobs still running: ${runningJobs(service)}`);
}

/** The service's workers that run jobs now, and how many each. */
function runningJobs(service: MediaService): string {
  const busy = (service.server.jobs?.workers ?? []).filter((worker) => worker.running() > 0);
  return busy.map((worker) => `${worker.id}: ${worker.running()}`).join(', ') || 'none';
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
  afterAll(() => closeAfterTrickles(service));

  it('when a host trickles bytes forever, then each attempt ends at the deadline and the file ends failed', async () => {
    reportOnFailure(() => service);
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
  // A test that failed midway left its trickles running, holding slots: they end first.
  afterAll(() => closeAfterTrickles(service));

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

  /**
   * Ends the trickles (their host goes away) and waits until the workspaces' files are settled: each
   * file's attempts fail at once then (refused), within a few step-asides of 1-2 s; the bound stays
   * well below the test's own time limit, so a file that never settles is named, not a test timeout.
   */
  async function endTrickles(host: DripHost, workspaces: TestWorkspace[]): Promise<void> {
    await host.close();
    for (const ws of workspaces) await waitForNoJobs(service.server.db, ws.workspaceId, 'media-fetch', 15_000);
  }

  it("when one workspace's 8 files trickle from one host, then it holds 4 of the 8 slots and another workspace's photo is stored at once", async () => {
    const { step } = reportOnFailure(() => service);
    const drip = await DripHost.start();
    const slow = await trickling(service, drip, 8);
    step('four trickles running');
    await waitFor('four trickles running', () => drip.open === 4);

    step("the other workspace's photo stored");
    await photoStoredWithin(5_000);

    expect(drip.most).toBe(4);
    step('the trickling files settled once their host closed');
    await endTrickles(drip, [slow]);
  });

  it("when two workspaces' files trickle from one host, then the host holds 4 of the 8 slots and a third workspace's photo is stored at once", async () => {
    const { step } = reportOnFailure(() => service);
    const drip = await DripHost.start();
    const slow = [await trickling(service, drip, 4), await trickling(service, drip, 4)];
    step('four trickles running');
    await waitFor('four trickles running', () => drip.open === 4);

    step("the third workspace's photo stored");
    await photoStoredWithin(5_000);

    expect(drip.most).toBe(4);
    step('the trickling files settled once their host closed');
    await endTrickles(drip, slow);
  });
});

/**
 * Holds every thread of libuv's pool, as a busy disk does (an open of a FIFO waits there for a
 * writer): file system calls, the spool's among them, wait until `release`.
 */
function holdThreadPool(): { release(): Promise<void> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-hold-'));
  const fifos = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE) || 4 }, (_, i) => path.join(dir, `fifo-${i}`));
  for (const fifo of fifos) execFileSync('mkfifo', [fifo]);
  const readers = fifos.map((fifo) => fs.promises.open(fifo, 'r'));
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      // Writers from another process: each open meets its reader, wherever that waits.
      execFileSync('sh', ['-c', 'for fifo; do : > "$fifo"; done', 'sh', ...fifos]);
      for (const reader of await Promise.all(readers)) await reader.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('a download cut before its bytes are spooled', () => {
  let service: MediaService;
  beforeAll(async () => {
    service = await startMediaService('media-cut', { metaGraphTimeoutMs: 300 });
  });
  afterAll(() => closeAfterTrickles(service));

  it("when the idle limit cuts an answer while the file system's threads are busy, then that attempt fails and a later one stores the file", async () => {
    const { step } = reportOnFailure(() => service);
    const bytes = randomBytes(4_000);
    let gets = 0;
    let hold: { release(): Promise<void> } | undefined;
    // The first answer's headers arrive while the spool directory cannot be made yet; its bytes never do.
    const { server, origin } = await listenOnLoopback(async (_req, res) => {
      gets++;
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': bytes.length });
      if (gets > 1) return void res.end(bytes);
      hold = holdThreadPool();
      res.flushHeaders();
    });
    try {
      const ws = await createWorkspace(service.server);
      const meta = await createMetaChannel(ws, 'instagram');
      const { event } = instagramAttachments(meta.externalId, customer(), [{ type: 'image', url: `${origin}/cdn/photo.jpg` }]);
      expect((await postWebhook(service.server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret })).status).toBe(200);
      step('the first answer');
      await waitFor('the first answer', () => hold !== undefined);

      // Five idle limits pass while the spool waits for a thread; then the disk is free again.
      await sleep(1_500);
      await hold!.release();
      step('the file stored');
      await waitForNoJobs(service.server.db, ws.workspaceId, 'media-fetch', 10_000);

      const [message] = await messagesOf(ws);
      expect(message!.attachments).toEqual([expect.objectContaining({ type: 'image', status: 'stored', size: 4_000, sha256: sha256(bytes) })]);
      // The first answer sent no byte: a later attempt stored the file (on a loaded machine the idle
      // limit may cut another before it).
      expect(gets).toBeGreaterThanOrEqual(2);
    } finally {
      await hold?.release().catch(() => {});
      await closeServer(server);
    }
  });
});
