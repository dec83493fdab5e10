// A customer's photo, voice note, document or sticker: stored with its message at once as a
// `pending` attachment (content its caption, or null), then fetched from Meta by a job (WhatsApp's
// retrieve call and its short-lived URL with the token; Instagram's attachment URL), checked
// against Meta's SHA-256 and size, stored, and announced with message.updated. Passing failures
// retry with a fresh URL, a mismatch fails at once. Erasing the person deletes their files.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createWorkspace, request, UUID, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, graphError, instagramAttachments, instagramDelivery, whatsappDelivery, whatsappMedia } from './helpers/graph.js';
import { waitFor } from './helpers/processes.js';
import { waitForNoJobs } from './helpers/queue.js';
import { startMediaService, type MediaService } from './helpers/media.js';
import type { TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];

let graph: GraphDouble;
let server: TestServer;
let service: MediaService;
let dir: string;

beforeAll(async () => {
  service = await startMediaService('media-in');
  ({ graph, server, dir } = service);
});
afterAll(() => service.close());

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const phone = (): string => `55119${String(Date.now() % 1e8).padStart(8, '0')}${Math.floor(Math.random() * 10)}`;

async function inboundMessage(ws: TestWorkspace, externalId: string): Promise<Message> {
  let found: Message | undefined;
  await waitFor(`inbound ${externalId}`, async () => {
    const { data: threads } = await ws.api.GET('/threads');
    for (const thread of threads!.data) {
      const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: thread.id } } });
      found = data!.data.find((m) => m.externalId === externalId) ?? found;
    }
    return found !== undefined;
  });
  return found!;
}

async function messageNow(ws: TestWorkspace, message: Message): Promise<Message> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: message.threadId } } });
  return data!.data.find((m) => m.id === message.id)!;
}

async function eventsOf(ws: TestWorkspace, type: 'message.created' | 'message.updated') {
  const { data } = await ws.api.GET('/events', { params: { query: { type } } });
  return data!.data;
}

describe('inbound media on WhatsApp', () => {
  let ws: TestWorkspace;
  let meta: MetaChannel;
  beforeAll(async () => {
    ws = await createWorkspace(server);
    meta = await createMetaChannel(ws, 'whatsapp');
  });

  it('when a photo with a caption arrives, then it is stored pending at once, then fetched, checked, stored and announced', async () => {
    const bytes = randomBytes(70_000);
    // Meta's webhook writes the hash in base64; the retrieve call in hex: the same digest.
    const mediaId = graph.addMedia({ bytes, mimeType: 'image/jpeg' });
    const inbound = whatsappMedia(phone(), 'image', {
      id: mediaId,
      mimeType: 'image/jpeg',
      sha256: createHash('sha256').update(bytes).digest('base64'),
      caption: 'Olha o comprovante',
    });

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    expect(res.status).toBe(200);
    const created = (await eventsOf(ws, 'message.created')).find((e) => (e.data.object as Message).externalId === inbound.id)!;
    const first = created.data.object as Message;
    expect(first.content).toBe('Olha o comprovante');
    expect(first.attachments).toEqual([
      {
        id: expect.stringMatching(UUID),
        type: 'image',
        mimeType: 'image/jpeg',
        size: null,
        // Announced in base64, shown in the contract's lowercase hex before the bytes are fetched.
        sha256: sha256(bytes),
        filename: null,
        caption: 'Olha o comprovante',
        status: 'pending',
      },
    ]);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const message = await messageNow(ws, first);
    expect(message.attachments).toEqual([{ ...first.attachments[0], size: 70_000, sha256: sha256(bytes), status: 'stored' }]);
    const updated = (await eventsOf(ws, 'message.updated')).filter((e) => (e.data.object as Message).id === first.id);
    expect(updated).toHaveLength(1);
    expect(updated[0]!.data.object).toEqual(message);
    expect(updated[0]!.data.actor).toEqual({ type: 'system', id: null });
    const download = await fetch(`${server.baseUrl}/v1/media/${message.attachments[0]!.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
    // The retrieve call, then its URL, both with the channel's token.
    const calls = graph.requests.filter((r) => r.externalId === mediaId);
    expect(calls.map((r) => r.path)).toEqual([`/v23.0/${mediaId}`, `/whatsapp-media/${mediaId}`]);
    expect(calls.every((r) => r.authorization === `Bearer ${meta.accessToken}`)).toBe(true);
  });

  it('when the download fails twice in passing, then it retries with a fresh URL each time and stores the voice note', async () => {
    const bytes = randomBytes(5_000);
    const mediaId = graph.addMedia({ bytes, mimeType: 'audio/ogg; codecs=opus' });
    let downloads = 0;
    graph.answer((req) => (req.path.startsWith('/whatsapp-media/') && req.externalId === mediaId && ++downloads <= 2 ? { status: 503 } : undefined));
    const inbound = whatsappMedia(phone(), 'audio', { id: mediaId, mimeType: 'audio/ogg; codecs=opus', sha256: sha256(bytes), voice: true });

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');
    graph.answer(undefined);

    const message = await messageNow(ws, first);
    expect(first.content).toBeNull();
    expect(message.attachments[0]).toMatchObject({ type: 'audio', mimeType: 'audio/ogg', size: 5_000, status: 'stored' });
    const paths = graph.requests.filter((r) => r.externalId === mediaId).map((r) => r.path);
    expect(paths.filter((p) => p === `/v23.0/${mediaId}`)).toHaveLength(3);
    expect(paths.filter((p) => p.startsWith('/whatsapp-media/'))).toHaveLength(3);
  });

  it('when the bytes do not match the announced SHA-256, then the attachment fails at once and nothing is stored', async () => {
    const bytes = randomBytes(2_000);
    const mediaId = graph.addMedia({ bytes, mimeType: 'application/pdf', sha256: sha256(randomBytes(10)) });
    const inbound = whatsappMedia(phone(), 'document', { id: mediaId, mimeType: 'application/pdf', sha256: sha256(bytes), filename: 'boleto.pdf' });

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const message = await messageNow(ws, first);
    expect(message.attachments[0]).toMatchObject({ type: 'document', filename: 'boleto.pdf', status: 'failed', sha256: null });
    expect(graph.requests.filter((r) => r.path === `/v23.0/${mediaId}`)).toHaveLength(1);
    expect((await request(server, 'GET', `/v1/media/${message.attachments[0]!.id}`, { apiKey: ws.apiKey })).status).toBe(404);
    await waitFor('the spool to be empty', async () => (await fs.readdir(path.join(dir, '.spool'))).length === 0);
  });

  it('when a document has a filename over 255 characters, then it is kept cut to 255 and the file is stored', async () => {
    const bytes = randomBytes(1_500);
    const mediaId = graph.addMedia({ bytes, mimeType: 'application/pdf' });
    const filename = `${'relatório-'.repeat(30)}.pdf`;
    const inbound = whatsappMedia(phone(), 'document', { id: mediaId, mimeType: 'application/pdf', sha256: sha256(bytes), filename });

    expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret })).status).toBe(200);
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const message = await messageNow(ws, first);
    expect(message.attachments[0]).toMatchObject({ type: 'document', filename: [...filename].slice(0, 255).join(''), status: 'stored' });
  });

  it('when a document name carries CR/LF, slashes and a right-to-left override, then it is cleaned as an upload is', async () => {
    const bytes = randomBytes(1_200);
    const mediaId = graph.addMedia({ bytes, mimeType: 'application/pdf' });
    const inbound = whatsappMedia(phone(), 'document', {
      id: mediaId,
      mimeType: 'application/pdf',
      sha256: sha256(bytes),
      filename: '../boleto\r\n\u202efdp.exe/Relato\u0301rio.pdf',
    });

    expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret })).status).toBe(200);
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const message = await messageNow(ws, first);
    expect(message.attachments[0]).toMatchObject({ type: 'document', filename: '.._boletofdp.exe_Relat\u00f3rio.pdf', status: 'stored' });
  });

  it('when a customer sends a zip, then it is stored as what it is and served as application/octet-stream, never rendered as its own type', async () => {
    for (const mimeType of ['application/zip', 'text/html']) {
      const bytes = Buffer.from(mimeType === 'text/html' ? '<script>alert(1)</script>' : randomBytes(800));
      const mediaId = graph.addMedia({ bytes, mimeType });
      const inbound = whatsappMedia(phone(), 'document', { id: mediaId, mimeType, sha256: sha256(bytes), filename: 'arquivo' });

      expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret })).status).toBe(200);
      const first = await inboundMessage(ws, inbound.id);
      await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

      const message = await messageNow(ws, first);
      expect(message.attachments[0]).toMatchObject({ type: 'document', mimeType, status: 'stored' });
      // request() checks the answer against the contract too.
      const checked = await request(server, 'GET', `/v1/media/${message.attachments[0]!.id}`, { apiKey: ws.apiKey });
      expect(checked.status).toBe(200);
      const download = await fetch(`${server.baseUrl}/v1/media/${message.attachments[0]!.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
      expect(download.headers.get('content-type')).toBe('application/octet-stream');
      expect(download.headers.get('x-content-type-options')).toBe('nosniff');
      expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
    }
  });

  it('when Graph refuses the media id for good, then the attachment fails without retrying', async () => {
    graph.answer((req) => (req.path === '/v23.0/999000111222' ? graphError(100, 'Unsupported get request', 400) : undefined));
    const inbound = whatsappMedia(phone(), 'sticker', { id: '999000111222', mimeType: 'image/webp', sha256: sha256(Buffer.from('x')) });

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');
    graph.answer(undefined);

    expect((await messageNow(ws, first)).attachments[0]).toMatchObject({ type: 'sticker', status: 'failed' });
    expect(graph.requests.filter((r) => r.path === '/v23.0/999000111222')).toHaveLength(1);
  });

  it("when the contact is erased, then their files' bytes are deleted and their ids answer 404", async () => {
    const bytes = randomBytes(1_000);
    const mediaId = graph.addMedia({ bytes, mimeType: 'image/png' });
    const inbound = whatsappMedia(phone(), 'image', { id: mediaId, mimeType: 'image/png', sha256: sha256(bytes), caption: 'meu RG' });
    const erasing = await createWorkspace(server);
    const channel = await createMetaChannel(erasing, 'whatsapp');
    await postWebhook(server, channel.channel.id, whatsappDelivery(channel.externalId, inbound), { appSecret: channel.appSecret });
    const first = await inboundMessage(erasing, inbound.id);
    await waitForNoJobs(server.db, erasing.workspaceId, 'media-fetch');
    const file = path.join(dir, erasing.workspaceId, first.attachments[0]!.id);
    await fs.access(file);

    const erased = await erasing.api.DELETE('/contacts/{id}', { params: { path: { id: first.contactId } } });
    expect(erased.response.status).toBe(204);
    await waitForNoJobs(server.db, erasing.workspaceId, 'media-delete');

    await expect(fs.access(file)).rejects.toThrow();
    expect((await request(server, 'GET', `/v1/media/${first.attachments[0]!.id}`, { apiKey: erasing.apiKey })).status).toBe(404);
    const message = await messageNow(erasing, first);
    expect(message.content).toBeNull();
    expect(message.attachments[0]!.caption).toBeNull();
    const events = (await eventsOf(erasing, 'message.created')).filter((e) => (e.data.object as Message).id === first.id);
    expect((events[0]!.data.object as Message).attachments[0]!.caption).toBeNull();
  });
});

describe('inbound media when the store or the commit fails', () => {
  it('when the store refuses every attempt, then the file ends failed and no spooled part is left behind', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    // A file where the workspace's directory would go: every put into the store fails.
    await fs.writeFile(path.join(dir, ws.workspaceId), 'not a directory');
    const bytes = randomBytes(3_000);
    const mediaId = graph.addMedia({ bytes, mimeType: 'application/pdf' });
    const inbound = whatsappMedia(phone(), 'document', { id: mediaId, mimeType: 'application/pdf', sha256: sha256(bytes), filename: 'nota.pdf' });

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, inbound.id);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    expect((await messageNow(ws, first)).attachments[0]).toMatchObject({ status: 'failed' });
    expect(graph.requests.filter((r) => r.path === `/v23.0/${mediaId}`)).toHaveLength(4);
    expect(await fs.readdir(path.join(dir, '.spool'))).toEqual([]);
  });

  it('when the commit fails after the bytes were stored, then the file ends failed and its bytes leave the store', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    // The database refuses to mark this one file stored: each attempt stores its bytes, then its commit fails.
    await sql`create function refuse_stored_media() returns trigger language plpgsql as $$
      begin
        if new.status = 'stored' and new.filename = 'never-committed.pdf' then raise exception 'the commit fails'; end if;
        return new;
      end $$`.execute(server.db);
    await sql`create trigger refuse_stored_media before update on media for each row execute function refuse_stored_media()`.execute(server.db);
    try {
      const bytes = randomBytes(3_000);
      const mediaId = graph.addMedia({ bytes, mimeType: 'application/pdf' });
      const inbound = whatsappMedia(phone(), 'document', {
        id: mediaId,
        mimeType: 'application/pdf',
        sha256: sha256(bytes),
        filename: 'never-committed.pdf',
      });

      await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
      const first = await inboundMessage(ws, inbound.id);
      await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

      expect((await messageNow(ws, first)).attachments[0]).toMatchObject({ status: 'failed' });
      expect(graph.requests.filter((r) => r.path === `/v23.0/${mediaId}`)).toHaveLength(4);
      await expect(fs.access(path.join(dir, ws.workspaceId, first.attachments[0]!.id))).rejects.toThrow();
    } finally {
      await sql`drop trigger refuse_stored_media on media`.execute(server.db);
      await sql`drop function refuse_stored_media()`.execute(server.db);
    }
  });
});

describe('inbound media on Instagram', () => {
  it('when a message carries an image and a video, then each is fetched from its URL and stored with the served type', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const image = randomBytes(3_000);
    const video = randomBytes(9_000);
    const imageUrl = graph.addInstagramMedia({ bytes: image, mimeType: 'image/png' });
    const videoUrl = graph.addInstagramMedia({ bytes: video, mimeType: 'video/mp4' });
    const { event, mid } = instagramAttachments(meta.externalId, '7412365898', [
      { type: 'image', url: imageUrl },
      { type: 'video', url: videoUrl },
    ]);

    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, mid);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const message = await messageNow(ws, first);
    expect(first.content).toBeNull();
    expect(message.attachments).toEqual([
      expect.objectContaining({ type: 'image', mimeType: 'image/png', size: 3_000, sha256: sha256(image), status: 'stored' }),
      expect.objectContaining({ type: 'video', mimeType: 'video/mp4', size: 9_000, sha256: sha256(video), status: 'stored' }),
    ]);
  });

  it('when a customer sends a 20 MB video (Instagram carries 25 MB), then it is stored, and WhatsApp, which carries 16 MB, refuses to send it on', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const whatsapp = await createMetaChannel(ws, 'whatsapp');
    const video = randomBytes(20 * 2 ** 20);
    const { event, mid } = instagramAttachments(meta.externalId, '7412365811', [
      { type: 'video', url: graph.addInstagramMedia({ bytes: video, mimeType: 'video/mp4' }) },
    ]);

    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    const first = await inboundMessage(ws, mid);
    await waitForNoJobs(server.db, ws.workspaceId, 'media-fetch');

    const stored = (await messageNow(ws, first)).attachments[0]!;
    expect(stored).toMatchObject({ type: 'video', size: video.length, sha256: sha256(video), status: 'stored' });
    const photo = randomBytes(10);
    const customer = whatsappMedia(phone(), 'image', {
      id: graph.addMedia({ bytes: photo, mimeType: 'image/png' }),
      mimeType: 'image/png',
      sha256: sha256(photo),
    });
    await postWebhook(server, whatsapp.channel.id, whatsappDelivery(whatsapp.externalId, customer), { appSecret: whatsapp.appSecret });
    const contact = (await inboundMessage(ws, customer.id)).contactId;
    const refused = await ws.api.POST('/messages', { body: { contactId: contact, channelId: whatsapp.channel.id, attachments: [{ mediaId: stored.id }] } });
    expect(refused.response.status).toBe(422);
    expect(refused.error!.error).toMatchObject({
      code: 'attachment_not_supported',
      details: [{ path: '/body/attachments/0/mediaId', message: 'WhatsApp takes a video of at most 16 MB' }],
    });
  });
});
