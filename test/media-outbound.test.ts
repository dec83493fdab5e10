// Sending files: POST /messages with `attachments` (uploaded with POST /media) makes one message per
// file after the text; WhatsApp gets each file uploaded (multipart POST /{phone-number-id}/media) then
// a message naming its media id; Instagram an upload to message_attachments then a message naming
// the attachment_id. Meta's 24-hour window and each channel's limits are 422s, and nothing is queued.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, buildPhone, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { GraphDouble, instagramDelivery, instagramText, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { waitForNoJobs } from './helpers/queue.js';
import { startMediaService, type MediaService } from './helpers/media.js';
import type { TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];
type Attachment = components['schemas']['Attachment'];

let graph: GraphDouble;
let server: TestServer;
let service: MediaService;

beforeAll(async () => {
  service = await startMediaService('media-out');
  ({ graph, server } = service);
});
afterAll(() => service.close());

async function upload(ws: TestWorkspace, bytes: Buffer, type: string, filename?: string): Promise<Attachment> {
  const answer = await request(server, 'POST', `/v1/media${filename ? `?filename=${filename}` : ''}`, {
    apiKey: ws.apiKey,
    headers: { 'content-type': type },
    rawBody: bytes,
  });
  expect(answer.status).toBe(201);
  return answer.body as Attachment;
}

async function threadMessages(ws: TestWorkspace, threadId: string): Promise<Message[]> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });
  return data!.data;
}

describe('POST /messages with attachments', () => {
  it('when text and two files go to a WhatsApp contact, then the text, then each file is uploaded and sent as its own message, in order', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const phone = buildPhone();
    const inbound = whatsappText(phone.slice(1), 'Oi, pode mandar o boleto?', 'Mariana Silva');
    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { phone } } });
    const photo = randomBytes(4_000);
    const image = await upload(ws, photo, 'image/jpeg');
    const pdf = await upload(ws, randomBytes(6_000), 'application/pdf', 'boleto.pdf');

    const { data, response } = await ws.api.POST('/messages', {
      body: {
        contactId: contacts!.data[0]!.id,
        channelId: meta.channel.id,
        content: 'Segue o boleto e a foto do produto',
        attachments: [{ mediaId: image.id, caption: 'Produto' }, { mediaId: pdf.id }],
      },
    });
    expect(response.status).toBe(201);
    expect(data).toMatchObject({ content: 'Segue o boleto e a foto do produto', attachments: [], status: 'queued' });
    await waitForNoJobs(server.db, ws.workspaceId, 'message-delivery');

    const outbound = (await threadMessages(ws, data!.threadId)).filter((m) => m.direction === 'outbound');
    expect(outbound.map((m) => [m.content, m.attachments, m.status])).toEqual([
      ['Segue o boleto e a foto do produto', [], 'sent'],
      ['Produto', [{ ...image, caption: 'Produto' }], 'sent'],
      [null, [pdf], 'sent'],
    ]);
    const sent = graph.to(meta.externalId).filter((r) => r.method === 'POST');
    expect(sent.map((r) => r.path.split('/').pop())).toEqual(['messages', 'media', 'messages', 'media', 'messages']);
    expect(sent[1]!.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(sent[1]!.raw.includes(photo)).toBe(true);
    expect(sent[1]!.raw.toString('latin1')).toContain('name="messaging_product"\r\n\r\nwhatsapp');
    expect(sent[1]!.raw.toString('latin1')).toContain('name="type"\r\n\r\nimage/jpeg');
    expect(sent[2]!.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: phone.slice(1),
      type: 'image',
      image: { id: (sent[1]!.answer as { body: { id: string } }).body.id, caption: 'Produto' },
    });
    expect(sent[4]!.body).toMatchObject({ type: 'document', document: { id: (sent[3]!.answer as { body: { id: string } }).body.id, filename: 'boleto.pdf' } });
    expect(sent.every((r) => r.authorization === `Bearer ${meta.accessToken}`)).toBe(true);
  });

  it('when a file goes to an Instagram contact, then it is uploaded to message_attachments and sent by its attachment_id', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { event } = instagramText(meta.externalId, '8812345678', 'Oi!');
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { instagramId: '8812345678' } } });
    const video = await upload(ws, randomBytes(3_000), 'video/mp4');

    const { data } = await ws.api.POST('/messages', {
      body: { contactId: contacts!.data[0]!.id, channelId: meta.channel.id, attachments: [{ mediaId: video.id }] },
    });
    expect(data).toMatchObject({ content: null, attachments: [video] });
    await waitForNoJobs(server.db, ws.workspaceId, 'message-delivery');

    const sent = graph.to(meta.externalId).filter((r) => r.method === 'POST');
    expect(sent.map((r) => r.path.split('/').pop())).toEqual(['message_attachments', 'messages']);
    expect(sent[0]!.raw.toString('latin1')).toContain('{"attachment":{"type":"video","payload":{"is_reusable":true}}}');
    expect(sent[0]!.raw.toString('latin1')).toContain('name="platform"\r\n\r\ninstagram\r\n');
    expect(sent[1]!.body).toEqual({
      recipient: { id: '8812345678' },
      message: { attachment: { type: 'video', payload: { attachment_id: (sent[0]!.answer as { body: { attachment_id: string } }).body.attachment_id } } },
    });
  });

  it('when a file goes on a sandbox channel, then it is sent and delivered and nothing leaves', async () => {
    const ws = await createWorkspace(server);
    const { data: channels } = await ws.api.GET('/channels');
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const sticker = await upload(ws, randomBytes(1_000), 'image/webp');
    const before = graph.requests.length;

    const { data } = await ws.api.POST('/messages', {
      body: { contactId: contact!.id, channelId: channels!.data.find((c) => c.type === 'whatsapp')!.id, attachments: [{ mediaId: sticker.id }] },
    });
    await waitForNoJobs(server.db, ws.workspaceId);

    expect((await threadMessages(ws, data!.threadId))[0]).toMatchObject({ attachments: [sticker], status: 'delivered' });
    expect(graph.requests.length).toBe(before);
  });

  it('when a file is unknown, another workspace’s, or one the channel cannot carry, then 422 and nothing is queued', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { event } = instagramText(meta.externalId, '8899001122', 'Oi!');
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { instagramId: '8899001122' } } });
    const pair = { contactId: contacts!.data[0]!.id, channelId: meta.channel.id };
    const theirs = await upload(other, randomBytes(100), 'image/png');
    const sticker = await upload(ws, randomBytes(100), 'image/webp');
    const word = await upload(ws, randomBytes(100), 'application/msword');

    const unknown = await ws.api.POST('/messages', { body: { ...pair, attachments: [{ mediaId: theirs.id }] } });
    const refused = await ws.api.POST('/messages', { body: { ...pair, content: 'Oi', attachments: [{ mediaId: word.id }, { mediaId: sticker.id }] } });
    const eleven = await ws.api.POST('/messages', { body: { ...pair, attachments: Array.from({ length: 11 }, () => ({ mediaId: word.id })) } });

    expect(unknown.response.status).toBe(422);
    expect(unknown.error!.error).toMatchObject({ code: 'invalid_reference', details: [{ path: '/body/attachments/0/mediaId' }] });
    expect(refused.response.status).toBe(422);
    expect(refused.error!.error).toMatchObject({
      code: 'attachment_not_supported',
      details: [{ path: '/body/attachments/0/mediaId', message: 'Instagram takes only PDF documents' }],
    });
    expect(eleven.response.status).toBe(400);
    const { data: threads } = await ws.api.GET('/threads');
    expect((await threadMessages(ws, threads!.data[0]!.id)).filter((m) => m.direction === 'outbound')).toEqual([]);
  });

  it('when a voice note or video is of a format Instagram does not play (ogg, amr, mpeg, 3gpp), or a file has a caption, then 422 and nothing is queued', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { event } = instagramText(meta.externalId, '8877665544', 'Oi!');
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { instagramId: '8877665544' } } });
    const pair = { contactId: contacts!.data[0]!.id, channelId: meta.channel.id };

    for (const type of ['audio/ogg', 'audio/amr', 'audio/mpeg', 'video/3gpp']) {
      const file = await upload(ws, randomBytes(100), type);
      const refused = await ws.api.POST('/messages', { body: { ...pair, attachments: [{ mediaId: file.id }] } });
      expect(refused.response.status, type).toBe(422);
      expect(refused.error!.error).toMatchObject({ code: 'attachment_not_supported', details: [{ path: '/body/attachments/0/mediaId' }] });
    }
    // A file Instagram takes, with a caption it would never show: refused, not stored and dropped.
    const image = await upload(ws, randomBytes(100), 'image/png');
    const captioned = await ws.api.POST('/messages', { body: { ...pair, attachments: [{ mediaId: image.id, caption: 'Produto' }] } });
    expect(captioned.response.status).toBe(422);
    expect(captioned.error!.error).toMatchObject({ code: 'attachment_not_supported', details: [{ path: '/body/attachments/0/caption' }] });
    const { data: threads } = await ws.api.GET('/threads');
    expect((await threadMessages(ws, threads!.data[0]!.id)).filter((m) => m.direction === 'outbound')).toEqual([]);
  });

  it('when the contact has not written within 24 hours, then a file is refused like free text', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const image = await upload(ws, randomBytes(100), 'image/png');

    const outside = await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId: meta.channel.id, attachments: [{ mediaId: image.id }] } });
    const withTemplate = await request(server, 'POST', '/v1/messages', {
      apiKey: ws.apiKey,
      body: { contactId: contact!.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' }, attachments: [{ mediaId: image.id }] },
    });

    expect(outside.response.status).toBe(422);
    expect(outside.error!.error).toMatchObject({ code: 'outside_messaging_window', details: [{ path: '/body/attachments' }] });
    expect(withTemplate.status).toBe(400);
  });
});
