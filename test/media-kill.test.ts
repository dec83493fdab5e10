// Issue 24, on PostgreSQL: a service process killed with SIGKILL in the middle of an inbound file's
// download loses nothing. Its `media-fetch` job's lease runs out, the next process (same database,
// same file store) takes the job, fetches the file again with a fresh URL, and stores it once: the
// attachment `stored` with the file's SHA-256 and size, its bytes served exactly, one message, one
// message.updated. What the dead process had spooled (nothing of it runs after a SIGKILL) is swept
// when a process starts, once it has gone unwritten for an hour; a newer spool file may be a live
// process's and stays.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { checkedClient } from './helpers/api.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { GraphDouble, whatsappDelivery, whatsappMedia } from './helpers/graph.js';
import { freePort, waitFor, waitForExit } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';
import { databaseUrl, ownDatabase, testSecretsKey, type OwnDatabase } from './helpers/server.js';

type Message = components['schemas']['Message'];

const SIZE = 400_000;
/** What the first download sends before it stalls. */
const SENT_BEFORE_STALL = 150_000;

if (!databaseUrl) console.log('media-kill.test.ts: skipped, it needs DATABASE_URL (two service processes share one PostgreSQL database)');

describe.skipIf(!databaseUrl)('a process killed mid-download (needs DATABASE_URL)', () => {
  let graph: GraphDouble;
  let own: OwnDatabase;
  let db: Db;
  let dir: string;
  const services: Service[] = [];
  beforeAll(async () => {
    graph = await GraphDouble.start();
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sf-media-kill-'));
  });
  afterAll(async () => {
    for (const service of services) await service.kill();
    await db.destroy();
    await graph.close();
    await own?.drop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it(
    'when the process is killed with SIGKILL while a WhatsApp image downloads, then the next process fetches it again and stores it once',
    async () => {
      const env = {
        DATABASE_URL: own.url,
        SECRETS_KEY: testSecretsKey.toString('base64'),
        META_GRAPH_URL: graph.url,
        // The stall outlasts the kill: the victim must not give up on the download by itself first.
        META_GRAPH_TIMEOUT_MS: '60000',
        MEDIA_STORE: `file:${dir}`,
        JOB_LEASE_MS: '2000',
        JOB_POLL_MS: '200',
        RETRY_BASE_MS: '200',
      };
      const victim = new Service(await freePort(), env);
      services.push(victim);
      const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Killed mid-download' });
      await victim.waitForListening(1);
      const ws = { ...key, api: checkedClient(`http://127.0.0.1:${victim.port}/v1`, key.apiKey) };
      const meta = await createMetaChannel(ws, 'whatsapp');

      const bytes = randomBytes(SIZE);
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const mediaId = graph.addMedia({ bytes, mimeType: 'image/jpeg' });
      let downloads = 0;
      // The first download sends its headers (the whole Content-Length) and part of the body, then holds the socket.
      graph.answer((req) =>
        req.path === `/whatsapp-media/${mediaId}` && ++downloads === 1
          ? { status: 200, raw: bytes, contentType: 'image/jpeg', stallAfter: SENT_BEFORE_STALL }
          : undefined,
      );
      const from = `55119${String(Date.now() % 1e8).padStart(8, '0')}7`;
      const inbound = whatsappMedia(from, 'image', { id: mediaId, mimeType: 'image/jpeg', sha256, caption: 'segue a foto' });
      const posted = await postWebhook({ baseUrl: `http://127.0.0.1:${victim.port}` }, meta.channel.id, whatsappDelivery(meta.externalId, inbound), {
        appSecret: meta.appSecret,
      });
      expect(posted.status).toBe(200);

      // Mid-download: the stalled answer's bytes are in the victim's spool, the job leased by it.
      const spoolDir = path.join(dir, '.spool');
      const spooled = async (): Promise<Array<{ name: string; size: number }>> => {
        const names = await fs.readdir(spoolDir).catch(() => [] as string[]);
        return Promise.all(names.map(async (name) => ({ name, size: (await fs.stat(path.join(spoolDir, name))).size })));
      };
      await waitFor('the download to stall mid-body', async () => downloads === 1 && (await spooled()).some((f) => f.size === SENT_BEFORE_STALL), 60_000);
      const leased = await db
        .selectFrom('jobs')
        .select(['locked_by'])
        .where('workspace_id', '=', key.workspaceId)
        .where('queue', '=', 'media-fetch')
        .executeTakeFirstOrThrow();
      expect(leased.locked_by).toMatch(new RegExp(`:${victim.child.pid}:`));
      const [partial, ...others] = await spooled();
      expect(others).toEqual([]);

      process.kill(-victim.child.pid!, 'SIGKILL');
      await waitForExit(victim.child);
      const message = await db.selectFrom('messages').selectAll().where('workspace_id', '=', key.workspaceId).executeTakeFirstOrThrow();
      expect(message.attachments).toMatchObject([{ status: 'pending' }]);
      // The killed process's part, aged past ABANDONED_SPOOL_MS; beside it a fresh one, as a live process's would be.
      const hoursAgo = new Date(Date.now() - 2 * 3_600_000);
      await fs.utimes(path.join(spoolDir, partial!.name), hoursAgo, hoursAgo);
      const live = { name: `${randomUUID()}.part`, size: 10 };
      await fs.writeFile(path.join(spoolDir, live.name), randomBytes(live.size));

      const next = new Service(await freePort(), env);
      services.push(next);
      await next.waitForListening(1);
      await waitFor(
        'the media-fetch job to end',
        async () =>
          (await db.selectFrom('jobs').select('id').where('workspace_id', '=', key.workspaceId).where('queue', '=', 'media-fetch').execute()).length === 0,
        60_000,
      );

      const api = checkedClient(`http://127.0.0.1:${next.port}/v1`, key.apiKey);
      const { data: page } = await api.GET('/threads/{threadId}/messages', { params: { path: { threadId: message.thread_id } } });
      expect(page!.data).toHaveLength(1);
      const stored = page!.data[0]!;
      expect(stored.id).toBe(message.id);
      expect(stored.attachments).toEqual([expect.objectContaining({ type: 'image', mimeType: 'image/jpeg', status: 'stored', size: SIZE, sha256 })]);
      const attachment = stored.attachments[0]!;
      const served = await fetch(`http://127.0.0.1:${next.port}/v1/media/${attachment.id}`, { headers: { authorization: `Bearer ${key.apiKey}` } });
      expect(served.status).toBe(200);
      expect(Buffer.from(await served.arrayBuffer()).equals(bytes)).toBe(true);

      const counted = await db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('workspace_id', '=', key.workspaceId)
        .executeTakeFirstOrThrow();
      expect(Number(counted.n)).toBe(1);
      const eventsOf = async (type: 'message.created' | 'message.updated') =>
        (await api.GET('/events', { params: { query: { type } } })).data!.data.filter((e) => (e.data.object as Message).id === message.id);
      expect(await eventsOf('message.created')).toHaveLength(1);
      const updated = await eventsOf('message.updated');
      expect(updated).toHaveLength(1);
      expect(updated[0]!.data.object).toEqual(stored);
      // Fetched twice: the killed attempt, then the next process's with a fresh URL; the file whole on the second.
      expect(downloads).toBe(2);
      await fs.access(path.join(dir, key.workspaceId, attachment.id));

      // The dead process's part swept at start-up, the live one kept; the next process's download left none.
      expect(await spooled()).toEqual([live]);
      expect(next.logs.matching(/abandoned spool files removed/).map((line) => line.files)).toEqual([1]);
    },
    START_MS * 2 + 90_000,
  );
});
