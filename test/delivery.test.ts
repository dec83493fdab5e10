// Outbound delivery through the durable queue: the WhatsApp Cloud API and Instagram Messaging API
// request shapes, passing failures retried with backoff, permanent ones recorded with Graph's code,
// order per contact while retrying, Meta's 24-hour window, and the sandbox's loop. The only double
// is Graph itself, a local HTTP server speaking its documented shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, UUID, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, graphError, instagramDelivery, instagramText, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { LogCapture, waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];

let graph: GraphDouble;
let server: TestServer;
let own: OwnDatabase | undefined;
const logs = new LogCapture();
beforeAll(async () => {
  graph = await GraphDouble.start();
  // Its workers take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({
    databaseUrl: own?.url,
    jobs: true,
    logs: logs.destination,
    config: { metaGraphUrl: graph.url, retryBaseMs: 20, retryMaxAttempts: 4, metaGraphTimeoutMs: 1_500, jobLeaseMs: 5_000, jobPollMs: 200 },
  });
});
afterAll(async () => {
  await server.close();
  await graph.close();
  await own?.drop();
});

async function contactWithPhone(ws: TestWorkspace): Promise<{ id: string; phone: string }> {
  const phone = buildPhone();
  const { data } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
  return { id: data!.id, phone };
}

/** The contact writes on the WhatsApp channel (a signed webhook), which opens the 24-hour window. */
async function whatsappInbound(meta: MetaChannel, phone: string, text = 'Oi!'): Promise<void> {
  const inbound = whatsappText(phone.slice(1), text, 'Mariana Silva');
  const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
  expect(res.status).toBe(200);
}

async function readMessage(ws: TestWorkspace, message: Message): Promise<Message> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: message.threadId }, query: { limit: 100 } } });
  return data!.data.find((m) => m.id === message.id)!;
}

async function waitForStatus(ws: TestWorkspace, message: Message, status: Message['status'], timeoutMs = 10_000): Promise<Message> {
  let current = message;
  await waitFor(`message ${message.id} ${status}`, async () => (current = await readMessage(ws, message)).status === status, timeoutMs);
  return current;
}

async function send(ws: TestWorkspace, body: components['schemas']['MessageCreate']): Promise<Message> {
  const { data, response, error } = await ws.api.POST('/messages', { body });
  if (response.status !== 201) throw new Error(`POST /messages: ${response.status} ${JSON.stringify(error)}`);
  return data!;
}

const storedJobs = (workspaceId: string) => server.db.selectFrom('jobs').selectAll().where('workspace_id', '=', workspaceId).execute();

describe('WhatsApp Cloud API', () => {
  it('when a text is sent in the window, then Graph gets the documented request and the message is sent with its wamid', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);

    const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Olá, Mariana! Seu pedido saiu para entrega.' });

    expect(queued).toMatchObject({ status: 'queued', externalId: null, error: null, template: null });
    const sent = await waitForStatus(ws, queued, 'sent');
    const [request, ...more] = graph.to(meta.externalId);
    expect(more).toEqual([]);
    expect(request).toMatchObject({
      method: 'POST',
      path: `/v23.0/${meta.externalId}/messages`,
      authorization: `Bearer ${meta.accessToken}`,
      contentType: 'application/json',
      body: {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: contact.phone.slice(1),
        type: 'text',
        text: { body: 'Olá, Mariana! Seu pedido saiu para entrega.' },
      },
    });
    const wamid = (request!.answer as { body: { messages: Array<{ id: string }> } }).body.messages[0]!.id;
    expect(sent).toEqual({ ...queued, status: 'sent', externalId: wamid });
    expect(await storedJobs(ws.workspaceId)).toEqual([]);
  });

  it('when a template is sent (no window needed), then Graph gets type template with its body parameters', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    const template = { name: 'pedido_em_rota', language: 'pt_BR', parameters: ['Mariana', '4521'] };

    const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, template });

    expect(queued).toMatchObject({ content: '[template pedido_em_rota] Mariana, 4521', template, status: 'queued' });
    await waitForStatus(ws, queued, 'sent');
    expect(graph.to(meta.externalId).map((r) => r.body)).toEqual([
      {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: contact.phone.slice(1),
        type: 'template',
        template: {
          name: 'pedido_em_rota',
          language: { code: 'pt_BR' },
          components: [
            {
              type: 'body',
              parameters: [
                { type: 'text', text: 'Mariana' },
                { type: 'text', text: '4521' },
              ],
            },
          ],
        },
      },
    ]);
  });

  it('when a template has no parameters, then it is sent without components', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);

    const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' } });

    await waitForStatus(ws, queued, 'sent');
    expect(graph.to(meta.externalId)[0]!.body.template).toEqual({ name: 'hello_world', language: { code: 'en_US' } });
  });
});

describe('Instagram Messaging API', () => {
  it('when a customer wrote and is answered, then Graph gets recipient/message and message_id becomes the externalId', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const customer = `17841${Date.now() % 1e10}`;
    const inbound = instagramText(meta.externalId, customer, 'Oi, tem esse tênis no 42?');
    expect((await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [inbound.event]), { appSecret: meta.appSecret })).status).toBe(200);
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { instagramId: customer } } });
    const contactId = contacts!.data[0]!.id;

    const queued = await send(ws, { contactId, channelId: meta.channel.id, content: 'Temos sim!' });

    const sent = await waitForStatus(ws, queued, 'sent');
    const [request] = graph.to(meta.externalId);
    expect(request).toMatchObject({
      path: `/v23.0/${meta.externalId}/messages`,
      authorization: `Bearer ${meta.accessToken}`,
      body: { recipient: { id: customer }, message: { text: 'Temos sim!' } },
    });
    expect(sent.externalId).toBe((request!.answer as { body: { message_id: string } }).body.message_id);
  });

  it('when the customer reads the answer (messaging_seen: read.mid), then the message is read, with message.updated; a read of an unknown mid changes nothing', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const customer = `17842${Date.now() % 1e10}`;
    const inbound = instagramText(meta.externalId, customer, 'Vocês entregam hoje?');
    expect((await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [inbound.event]), { appSecret: meta.appSecret })).status).toBe(200);
    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { instagramId: customer } } });
    const sent = await waitForStatus(ws, await send(ws, { contactId: contacts!.data[0]!.id, channelId: meta.channel.id, content: 'Entregamos sim!' }), 'sent');
    const seen = (mid: string) => ({ sender: { id: customer }, recipient: { id: meta.externalId }, timestamp: Date.now(), read: { mid } });

    const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [seen('aWdfZAG1faXRlbToxOnVua25vd24'), seen(sent.externalId!)]), {
      appSecret: meta.appSecret,
    });

    expect(res.status).toBe(200);
    const { data: read } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: sent.threadId } } });
    expect(read!.data.find((m) => m.id === sent.id)!.status).toBe('read');
    const { data: events } = await ws.api.GET('/events', { params: { query: { type: 'message.updated' } } });
    expect(events!.data.map((e) => e.data.object as { id: string; status: string }).filter((m) => m.id === sent.id)[0]).toMatchObject({ status: 'read' });
  });

  it('when a template is sent on Instagram, then it answers 422 template_not_supported and nothing is queued', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Bia', instagramId: `1784${Date.now()}` } });

    const { error, response } = await ws.api.POST('/messages', {
      body: { contactId: contact!.id, channelId: meta.channel.id, template: { name: 'promo', language: 'pt_BR' } },
    });

    expect(response.status).toBe(422);
    expect(error!.error.code).toBe('template_not_supported');
    expect(await storedJobs(ws.workspaceId)).toEqual([]);
  });
});

describe('failures', () => {
  it('when Graph fails passingly (HTTP 500, 429, code 131000 and a dropped connection), then it is retried until sent', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    const failures = [
      graphError(2, 'Service temporarily unavailable', 500),
      graphError(4, 'Application request limit reached', 429),
      graphError(131000, 'Something went wrong', 400),
    ];
    graph.answer((request) => {
      if (request.externalId !== meta.externalId) return undefined;
      return failures[graph.to(meta.externalId).length - 1];
    });
    try {
      const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Tentando de novo' });

      const sent = await waitForStatus(ws, queued, 'sent');

      const requests = graph.to(meta.externalId);
      expect(requests.map((r) => ('status' in r.answer! ? r.answer.status : 'drop'))).toEqual([500, 429, 400, 200]);
      expect(new Set(requests.map((r) => JSON.stringify(r.body))).size).toBe(1);
      expect(sent.error).toBeNull();
      // Backoff: each retry waited at least 3/4 of base x 2^(n-1) (20, 40, 80 ms).
      const gaps = requests.slice(1).map((r, i) => r.at - requests[i]!.at);
      gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(0.75 * 20 * 2 ** i - 5));
    } finally {
      graph.answer(undefined);
    }
  });

  it('when the connection drops or Graph does not answer in time, then it is retried', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    graph.answer((request) => {
      if (request.externalId !== meta.externalId) return undefined;
      const n = graph.to(meta.externalId).length;
      return n === 1 ? { drop: true } : n === 2 ? { status: 200, body: {}, delayMs: 2_000 } : undefined;
    });
    try {
      const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Rede instável' });

      await waitForStatus(ws, queued, 'sent');

      expect(graph.to(meta.externalId)).toHaveLength(3);
      const retries = logs.lines.filter((l) => l.msg === 'job failed; will retry' && String(l.error).includes('"code":'));
      expect(retries.map((l) => JSON.parse(String(l.error)).code)).toEqual(expect.arrayContaining(['network_error', 'timeout']));
    } finally {
      graph.answer(undefined);
    }
  });

  it('when Graph answers a permanent error, then the message fails at once with its code and message', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    graph.answer((request) => (request.externalId === meta.externalId ? graphError(131026, 'Message undeliverable', 400) : undefined));
    try {
      const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Sem WhatsApp' });

      const failed = await waitForStatus(ws, queued, 'failed');

      expect(failed).toEqual({ ...queued, status: 'failed', error: { code: '131026', message: 'Message undeliverable' } });
      expect(graph.to(meta.externalId)).toHaveLength(1);
      expect(await storedJobs(ws.workspaceId)).toEqual([]);
    } finally {
      graph.answer(undefined);
    }
  });

  it('when every attempt fails passingly, then after RETRY_MAX_ATTEMPTS the message fails with the last error', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    graph.answer((request) => (request.externalId === meta.externalId ? graphError(130429, 'Rate limit hit', 400) : undefined));
    try {
      const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Limite' });

      const failed = await waitForStatus(ws, queued, 'failed');

      expect(graph.to(meta.externalId)).toHaveLength(4);
      expect(failed.error).toEqual({ code: '130429', message: 'Rate limit hit' });
    } finally {
      graph.answer(undefined);
    }
  });
});

describe('order per contact', () => {
  it('when six messages go to one contact while the first is retried, then Graph gets them in creation order, one at a time', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    const other = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    await whatsappInbound(meta, other.phone);
    // Mensagem 1 fails passingly until all six are queued, it failed twice, and the other
    // contact's message went out (which it could not, were it queued behind Mensagem 1). Until all
    // are queued its failures come slowly, so its retries (20 ms apart) cannot run out of
    // attempts while the test is still sending.
    let allQueued = false;
    graph.answer((request) => {
      if (request.externalId !== meta.externalId || request.body.to !== contact.phone.slice(1)) return undefined;
      const requests = graph.to(meta.externalId);
      const attemptsOfFirst = requests.filter((r) => r.body.text?.body === 'Mensagem 1').length;
      const otherSent = requests.some((r) => r.body.to === other.phone.slice(1));
      if (request.body.text?.body !== 'Mensagem 1') return undefined;
      if (!allQueued) return { ...graphError(1, 'An unknown error occurred', 500), delayMs: 1_000 };
      if (attemptsOfFirst <= 2 || !otherSent) return graphError(1, 'An unknown error occurred', 500);
      return undefined;
    });
    try {
      const sent: Message[] = [];
      for (let i = 1; i <= 6; i++) sent.push(await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: `Mensagem ${i}` }));
      const elsewhere = await send(ws, { contactId: other.id, channelId: meta.channel.id, content: 'Outro contato' });
      allQueued = true;

      for (const message of sent) await waitForStatus(ws, message, 'sent');
      await waitForStatus(ws, elsewhere, 'sent');

      const toContact = graph.to(meta.externalId).filter((r) => r.body.to === contact.phone.slice(1));
      const bodies = toContact.map((r) => r.body.text.body as string);
      const retries = bodies.filter((b) => b === 'Mensagem 1').length;
      expect(retries).toBeGreaterThanOrEqual(3);
      expect(bodies).toEqual([...Array(retries).fill('Mensagem 1'), 'Mensagem 2', 'Mensagem 3', 'Mensagem 4', 'Mensagem 5', 'Mensagem 6']);
      // Each went out only after the one before it was answered.
      toContact.slice(1).forEach((r, i) => expect(r.at).toBeGreaterThanOrEqual(toContact[i]!.at));
      // Another contact's message did not wait for the retries.
      const otherRequest = graph.to(meta.externalId).find((r) => r.body.to === other.phone.slice(1))!;
      expect(otherRequest.at).toBeLessThan(toContact[retries - 1]!.at);
    } finally {
      graph.answer(undefined);
    }
  });
});

describe("Meta's 24-hour window", () => {
  it('when the contact never wrote, then free text is refused with 422 outside_messaging_window and nothing is queued or sent', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);

    const { error, response } = await ws.api.POST('/messages', { body: { contactId: contact.id, channelId: meta.channel.id, content: 'Promoção!' } });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'outside_messaging_window',
        message: 'The contact last wrote on this channel more than 24 hours ago (or never); send a template instead.',
        details: [{ path: '/body/content', message: expect.stringContaining('last: never') }],
        requestId: response.headers.get('x-request-id'),
      },
    });
    // Nothing stored, no job queued: no worker will ever call Graph for it.
    expect(await storedJobs(ws.workspaceId)).toEqual([]);
    expect(await server.db.selectFrom('messages').select('id').where('workspace_id', '=', ws.workspaceId).execute()).toEqual([]);
    expect(graph.to(meta.externalId)).toEqual([]);
  });

  it('when the contact last wrote 24 hours and a minute ago, then free text is refused, and within 24 hours it is sent', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    const stale = new Date(Date.now() - 24 * 3_600_000 - 60_000);
    await server.db.updateTable('threads').set({ last_inbound_at: stale }).where('workspace_id', '=', ws.workspaceId).execute();

    const refused = await ws.api.POST('/messages', { body: { contactId: contact.id, channelId: meta.channel.id, content: 'Tarde demais' } });
    await server.db
      .updateTable('threads')
      .set({ last_inbound_at: new Date(Date.now() - 23 * 3_600_000) })
      .where('workspace_id', '=', ws.workspaceId)
      .execute();
    const accepted = await ws.api.POST('/messages', { body: { contactId: contact.id, channelId: meta.channel.id, content: 'Ainda dá' } });

    expect(refused.response.status).toBe(422);
    expect(refused.error!.error.code).toBe('outside_messaging_window');
    expect(accepted.response.status).toBe(201);
    await waitForStatus(ws, accepted.data!, 'sent');
    expect(graph.to(meta.externalId).map((r) => r.body.text.body)).toEqual(['Ainda dá']);
  });

  it('when the contact has neither a phone nor a WhatsApp user id, then a WhatsApp template is refused with 422 contact_unreachable', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Sem telefone' } });

    const { error, response } = await ws.api.POST('/messages', {
      body: { contactId: contact!.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' } },
    });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'contact_unreachable',
        message: 'The contact cannot be reached on WhatsApp: it has neither a phone nor a WhatsApp user id.',
        details: [{ path: '/body/contactId', message: 'the contact has no phone and no whatsappUserId (they must write first, or be given a phone)' }],
        requestId: expect.any(String),
      },
    });
  });
});

describe('the sandbox', () => {
  it('when a message is sent on a sandbox channel, then it goes queued -> sent -> delivered within a second and nothing is sent anywhere', async () => {
    const ws = await createWorkspace(server);
    const contact = await contactWithPhone(ws);
    const before = graph.requests.length;
    const started = Date.now();

    const queued = await send(ws, { contactId: contact.id, channelId: ws.channels[0]!.id, content: 'Olá do sandbox' });
    const seen = new Set<string>();
    let delivered: Message | undefined;
    await waitFor(
      'delivered',
      async () => {
        const current = await readMessage(ws, queued);
        seen.add(current.status);
        if (current.status === 'delivered') delivered = current;
        return delivered !== undefined;
      },
      5_000,
    );

    expect(Date.now() - started).toBeLessThan(1_500);
    expect(queued.status).toBe('queued');
    expect([...seen].filter((s) => s !== 'queued')).toEqual(expect.arrayContaining(['delivered']));
    expect(delivered).toEqual({ ...queued, status: 'delivered', externalId: `sandbox.${queued.id}` });
    expect(graph.requests.length).toBe(before);
  });

  it('when the customer writes through the sandbox, then it is an inbound message in the open thread and the reply needs no window', async () => {
    const ws = await createWorkspace(server);
    const channelId = ws.channels[0]!.id;
    const phone = buildPhone();

    const { data: inbound, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channelId } },
      body: { from: phone, name: 'Carla Souza', content: 'Oi, quero trocar um produto' },
    });
    const reply = await send(ws, { contactId: inbound!.contactId, channelId, content: 'Claro, Carla!' });

    expect(response.status).toBe(201);
    expect(inbound).toEqual({
      id: expect.stringMatching(UUID),
      threadId: expect.stringMatching(UUID),
      contactId: expect.stringMatching(UUID),
      channelId,
      direction: 'inbound',
      content: 'Oi, quero trocar um produto',
      status: 'delivered',
      externalId: expect.stringMatching(/^sandbox\./),
      error: null,
      template: null,
      agentId: null,
      attachments: [],
      replyTo: null,
      reactions: [],
      interactive: null,
      createdAt: expect.stringMatching(ISO_MS),
    });
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: inbound!.contactId } } });
    expect(contact).toMatchObject({ name: 'Carla Souza', phone });
    expect(reply.threadId).toBe(inbound!.threadId);
    const { data: thread } = await ws.api.GET('/threads/{id}', { params: { path: { id: inbound!.threadId } } });
    expect(thread).toMatchObject({ lastInboundAt: inbound!.createdAt, lastMessageAt: reply.createdAt, status: 'open' });
    await waitForStatus(ws, reply, 'delivered');
  });

  it('when the sandbox inbound is asked of a meta channel, then it answers 404', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');

    const { error, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: meta.channel.id } },
      body: { from: buildPhone(), content: 'Oi' },
    });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { code: 'not_found', message: 'Channel not found.', requestId: expect.any(String) } });
  });
});

describe('Meta secrets while delivering', () => {
  it('when messages were sent, retried, failed and received above, then no access token or app secret is in any log line', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const contact = await contactWithPhone(ws);
    await whatsappInbound(meta, contact.phone);
    graph.answer((request) => (request.externalId === meta.externalId ? graphError(190, `Invalid OAuth access token`, 401) : undefined));
    try {
      const queued = await send(ws, { contactId: contact.id, channelId: meta.channel.id, content: 'Token inválido' });
      await waitForStatus(ws, queued, 'failed');
    } finally {
      graph.answer(undefined);
    }

    const logged = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(logged).toContain(meta.channel.id);
    for (const secret of [meta.accessToken, meta.appSecret, meta.verifyToken]) expect(logged).not.toContain(secret);
    expect(logged).not.toMatch(/EAA[0-9a-f]{32}/);
  });
});
