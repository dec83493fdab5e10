// Meta's webhooks at /webhooks/meta/{channelId}: the verification handshake, X-Hub-Signature-256
// over the raw body, WhatsApp messages and statuses, Instagram messaging, idempotency per provider
// message id, and what is refused or ignored. Deliveries are built as Meta documents them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createDatabase } from '../src/db/database.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, instagramDelivery, instagramText, metaSignature, whatsappDelivery, whatsappStatus, whatsappText } from './helpers/graph.js';
import { LogCapture, waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

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
    config: { metaGraphUrl: graph.url, retryBaseMs: 20, jobPollMs: 200 },
  });
});
afterAll(async () => {
  await server.close();
  await graph.close();
  await own?.drop();
});

const storedMessages = (workspaceId: string) =>
  server.db.selectFrom('messages').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
const storedContacts = (workspaceId: string) =>
  server.db.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();

/** The reasons logged for each delivery to the channel whose parts were left out. */
const ignoredParts = (channelId: string) =>
  logs.lines.filter((l) => l.msg === 'webhook delivery: parts ignored' && l.channelId === channelId).map((l) => l.ignored);

async function whatsappChannel(): Promise<{ ws: TestWorkspace; meta: MetaChannel }> {
  const ws = await createWorkspace(server);
  return { ws, meta: await createMetaChannel(ws, 'whatsapp') };
}

describe('GET /webhooks/meta/{channelId} (verification)', () => {
  it("when Meta sends the channel's verify token, then it answers 200 with the challenge as text", async () => {
    const { meta } = await whatsappChannel();

    const res = await request(
      server,
      'GET',
      `/webhooks/meta/${meta.channel.id}?hub.mode=subscribe&hub.verify_token=${meta.verifyToken}&hub.challenge=1158201444`,
    );

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.body).toBe(1158201444);
  });

  it('when the token is wrong, or the mode is not subscribe, then it answers 403', async () => {
    const { meta } = await whatsappChannel();

    const wrong = await request(server, 'GET', `/webhooks/meta/${meta.channel.id}?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1`);
    const mode = await request(server, 'GET', `/webhooks/meta/${meta.channel.id}?hub.mode=unsubscribe&hub.verify_token=${meta.verifyToken}&hub.challenge=1`);

    expect([wrong.status, mode.status]).toEqual([403, 403]);
    expect(wrong.body).toEqual({ error: { code: 'forbidden', message: 'The verify token does not match this channel.', requestId: expect.any(String) } });
  });

  it('when the channel is unknown, a sandbox one, or not a UUID, then it answers 404', async () => {
    const ws = await createWorkspace(server);

    for (const id of ['01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f', ws.channels[0]!.id, 'nope']) {
      const res = await request(server, 'GET', `/webhooks/meta/${id}?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: { code: 'not_found', message: 'Channel not found.', requestId: expect.any(String) } });
    }
  });
});

describe('POST /webhooks/meta/{channelId}: signatures', () => {
  it('when the signature is good, then it answers 200 and stores the message', async () => {
    const { ws, meta } = await whatsappChannel();
    const inbound = whatsappText('5511987650001', 'Oi!', 'Mariana Silva');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    expect((await storedMessages(ws.workspaceId)).map((m) => m.external_id)).toEqual([inbound.id]);
  });

  it.each([
    ['wrong', () => metaSignature('not the secret', '{}')],
    ['missing', () => null],
    ['not sha256=', () => 'sha1=0123'],
  ])('when the signature is %s, then it answers 401 invalid_signature and stores nothing', async (_label, signature) => {
    const { ws, meta } = await whatsappChannel();
    const inbound = whatsappText('5511987650002', 'Oi!', 'Mariana Silva');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { signature: signature() });

    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_signature');
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
    expect(await storedContacts(ws.workspaceId)).toEqual([]);
  });

  it("when the body is signed with another channel's app secret, then it answers 401 and stores nothing", async () => {
    const { ws, meta } = await whatsappChannel();
    const other = await createMetaChannel(ws, 'whatsapp');
    const inbound = whatsappText('5511987650003', 'Oi!');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: other.appSecret });

    expect(res.status).toBe(401);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });

  it('when the signed bytes are re-serialised JSON of the same object, then the signature no longer matches (raw bytes are checked)', async () => {
    const { meta } = await whatsappChannel();
    const payload = whatsappDelivery(meta.externalId, whatsappText('5511987650004', 'Oi!'));
    const signature = metaSignature(meta.appSecret, JSON.stringify(payload));

    const res = await postWebhook(server, meta.channel.id, payload, { signature, rawBody: JSON.stringify(payload, null, 2) });

    expect(res.status).toBe(401);
  });

  it('when the body is over 1 MiB, then it answers 413', async () => {
    const { meta } = await whatsappChannel();
    const body = JSON.stringify({ object: 'whatsapp_business_account', entry: [], pad: 'x'.repeat(1024 * 1024) });

    const res = await postWebhook(server, meta.channel.id, undefined, { appSecret: meta.appSecret, rawBody: body });

    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
  });

  it("when the channel's app secret changes after it was read for a delivery, then a delivery signed with the old secret is refused 401 and stores nothing; one signed with the new secret is stored", async () => {
    const { ws, meta } = await whatsappChannel();
    const first = whatsappText('5511987650011', 'Oi!');
    expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, first), { appSecret: meta.appSecret })).status).toBe(200);
    // The app secret rotated at Meta, and here (this instance's copy of the row, kept from the first delivery, still has the old one).
    const appSecret = `rotated-${meta.appSecret}`;
    const patched = await ws.api.PATCH('/channels/{id}', { params: { path: { id: meta.channel.id } }, body: { meta: { appSecret } } });
    expect(patched.response.status).toBe(200);
    const late = whatsappText('5511987650012', 'Signed before the rotation');
    const current = whatsappText('5511987650013', 'Signed after it');

    const old = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, late), { appSecret: meta.appSecret });
    const rotated = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, current), { appSecret });

    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('invalid_signature');
    expect(rotated.status).toBe(200);
    expect((await storedMessages(ws.workspaceId)).map((m) => m.external_id)).toEqual([first.id, current.id]);
  });

  it("when the channel's app secret changes after it was read for a delivery, then the first delivery signed with the new secret is stored", async () => {
    const { ws, meta } = await whatsappChannel();
    const first = whatsappText('5511987650014', 'Oi!');
    expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, first), { appSecret: meta.appSecret })).status).toBe(200);
    const appSecret = `rotated-${meta.appSecret}`;
    await ws.api.PATCH('/channels/{id}', { params: { path: { id: meta.channel.id } }, body: { meta: { appSecret } } });
    const current = whatsappText('5511987650015', 'Signed after the rotation');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, current), { appSecret });

    expect(res.status).toBe(200);
    expect((await storedMessages(ws.workspaceId)).map((m) => m.external_id)).toEqual([first.id, current.id]);
  });

  it('when the channel is deleted after it was read for a delivery, then the next delivery answers 404 and stores nothing', async () => {
    const { ws, meta } = await whatsappChannel();
    // A delivery that stores nothing, so that the channel's row can go.
    const understood = await postWebhook(server, meta.channel.id, { object: 'page', entry: [] }, { appSecret: meta.appSecret });
    expect(understood.status).toBe(200);
    await sql`delete from channels where id = ${meta.channel.id}`.execute(server.db);

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, whatsappText('5511987650016', 'Oi!')), {
      appSecret: meta.appSecret,
    });

    expect(res.status).toBe(404);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
    expect(await storedContacts(ws.workspaceId)).toEqual([]);
  });

  it('when the channel is unknown, then it answers 404', async () => {
    const res = await postWebhook(server, '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f', { object: 'whatsapp_business_account', entry: [] }, { appSecret: 'x' });

    expect(res.status).toBe(404);
  });

  it('when the database is unreachable, then it answers 503 so that Meta retries', async () => {
    const down = createDatabase({ databaseUrl: 'postgres://root@127.0.0.1:1/none', pgliteDir: 'memory://', poolWaitMs: 500 });
    const broken = await startServer({ db: down, redisUrl: false });
    try {
      const res = await postWebhook(broken, '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f', { object: 'whatsapp_business_account', entry: [] }, { appSecret: 'x' });

      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('service_unavailable');
    } finally {
      await broken.close();
      await down.destroy();
    }
  });
});

describe('POST /webhooks/meta/{channelId}: WhatsApp messages', () => {
  it('when a new number writes, then a contact named after its WhatsApp profile gets the message in a new open thread', async () => {
    const { ws, meta } = await whatsappChannel();
    const phone = buildPhone();
    const inbound = whatsappText(phone.slice(1), 'Meu pedido 4521 não chegou', 'Sheena Nelson');

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });

    const { data: contacts } = await ws.api.GET('/contacts', { params: { query: { phone } } });
    expect(contacts!.data).toEqual([
      {
        id: expect.stringMatching(UUID),
        name: 'Sheena Nelson',
        phone,
        email: null,
        instagramId: null,
        whatsappUserId: null,
        whatsappUsername: null,
        externalId: null,
        labels: [],
        attributes: {},
        createdAt: expect.stringMatching(ISO_MS),
        updatedAt: expect.stringMatching(ISO_MS),
      },
    ]);
    const { data: threads } = await ws.api.GET('/threads', { params: { query: { contactId: contacts!.data[0]!.id } } });
    expect(threads!.data).toHaveLength(1);
    const thread = threads!.data[0]!;
    expect(thread).toMatchObject({
      channelId: meta.channel.id,
      status: 'open',
      lastInboundAt: expect.stringMatching(ISO_MS),
      lastMessageAt: expect.stringMatching(ISO_MS),
    });
    const { data: messages } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: thread.id } } });
    expect(messages!.data).toEqual([
      {
        id: expect.stringMatching(UUID),
        threadId: thread.id,
        contactId: contacts!.data[0]!.id,
        channelId: meta.channel.id,
        direction: 'inbound',
        content: 'Meu pedido 4521 não chegou',
        status: 'delivered',
        externalId: inbound.id,
        error: null,
        template: null,
        agentId: null,
        attachments: [],
        replyTo: null,
        reactions: [],
        interactive: null,
        createdAt: thread.lastMessageAt,
      },
    ]);
  });

  it('when a known contact writes, then the message joins their open thread and their name stays', async () => {
    const { ws, meta } = await whatsappChannel();
    const phone = buildPhone();
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact({ phone, name: 'Mariana Silva' }) });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: meta.channel.id } });

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, whatsappText(phone.slice(1), 'Oi', 'Mari')), { appSecret: meta.appSecret });

    const rows = await storedMessages(ws.workspaceId);
    expect(rows.map((m) => [m.thread_id, m.contact_id, m.direction])).toEqual([[thread!.id, contact!.id, 'inbound']]);
    expect((await storedContacts(ws.workspaceId)).map((c) => c.name)).toEqual(['Mariana Silva']);
  });

  it('when one delivery is posted three times, then there is one message', async () => {
    const { ws, meta } = await whatsappChannel();
    const payload = whatsappDelivery(meta.externalId, whatsappText(buildPhone().slice(1), 'Só uma vez', 'Ana'));

    const answers = await Promise.all([1, 2, 3].map(() => postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret })));

    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(await storedMessages(ws.workspaceId)).toHaveLength(1);
    expect(await storedContacts(ws.workspaceId)).toHaveLength(1);
    expect(await server.db.selectFrom('threads').select('id').where('workspace_id', '=', ws.workspaceId).execute()).toHaveLength(1);
  });

  it('when a message is not text, then it keeps a readable content (a file, its caption: the file is an attachment)', async () => {
    const { ws, meta } = await whatsappChannel();
    const from = buildPhone().slice(1);
    const messages = [
      {
        from,
        id: `wamid.img${Date.now()}`,
        timestamp: '1749416383',
        type: 'image',
        image: { caption: 'Nota fiscal', mime_type: 'image/jpeg', sha256: 'x', id: '1' },
      },
      {
        from,
        id: `wamid.loc${Date.now()}`,
        timestamp: '1749416384',
        type: 'location',
        location: { latitude: -23.55, longitude: -46.63, name: 'Loja Paulista' },
      },
      {
        from,
        id: `wamid.btn${Date.now()}`,
        timestamp: '1749416385',
        type: 'interactive',
        interactive: { type: 'button_reply', button_reply: { id: 'b1', title: 'Sim, confirmo' } },
      },
      { from, id: `wamid.unk${Date.now()}`, timestamp: '1749416386', type: 'unsupported', errors: [{ code: 131051, title: 'Message type unknown' }] },
    ];

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { messages }), { appSecret: meta.appSecret });

    expect((await storedMessages(ws.workspaceId)).map((m) => m.content)).toEqual([
      'Nota fiscal',
      '[location] Loja Paulista (-23.55, -46.63)',
      'Sim, confirmo',
      '[unsupported]',
    ]);
  });

  it('when a change is for another phone number, then it is ignored', async () => {
    const { ws, meta } = await whatsappChannel();

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery('999999999', whatsappText(buildPhone().slice(1), 'Oi')), {
      appSecret: meta.appSecret,
    });

    expect(res.status).toBe(200);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });

  it("when a change names no phone_number_id, then it is ignored and logged: it may be any number's", async () => {
    const { ws, meta } = await whatsappChannel();

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(null, whatsappText(buildPhone().slice(1), 'Oi')), { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
    expect(ignoredParts(meta.channel.id)).toEqual([['a change without metadata.phone_number_id']]);
  });

  it('when a signed delivery cannot be understood, then it answers 200, stores nothing and logs it', async () => {
    const { ws, meta } = await whatsappChannel();

    const notJson = await postWebhook(server, meta.channel.id, undefined, { appSecret: meta.appSecret, rawBody: 'hello' });
    const otherObject = await postWebhook(server, meta.channel.id, { object: 'page', entry: [{ messaging: [] }] }, { appSecret: meta.appSecret });

    expect([notJson.status, otherObject.status]).toEqual([200, 200]);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
    expect(
      logs.lines.filter((l) => l.msg === 'webhook delivery not understood; stored nothing' && l.channelId === meta.channel.id).map((l) => l.object),
    ).toEqual(['not JSON', 'page']);
  });
});

describe('POST /webhooks/meta/{channelId}: WhatsApp statuses', () => {
  async function sentMessage(): Promise<{ ws: TestWorkspace; meta: MetaChannel; messageId: string; wamid: string; phone: string }> {
    const { ws, meta } = await whatsappChannel();
    const phone = buildPhone();
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
    const { data: message } = await ws.api.POST('/messages', {
      body: { contactId: contact!.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' } },
    });
    let wamid = '';
    await waitFor('sent', async () => {
      const row = (await storedMessages(ws.workspaceId))[0]!;
      wamid = row.external_id ?? '';
      return row.status === 'sent';
    });
    return { ws, meta, messageId: message!.id, wamid, phone };
  }
  const statusOf = async (workspaceId: string) => {
    const row = (await storedMessages(workspaceId))[0]!;
    return { status: row.status, error: row.error };
  };

  it('when statuses arrive out of order, then they only move forward: a late delivered after read stays read', async () => {
    const { ws, meta, wamid, phone } = await sentMessage();
    const post = (status: string) =>
      postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { statuses: [whatsappStatus(wamid, status, phone.slice(1))] }), {
        appSecret: meta.appSecret,
      });

    await post('delivered');
    const afterDelivered = await statusOf(ws.workspaceId);
    await post('read');
    await post('delivered');
    await post('sent');
    const afterLate = await statusOf(ws.workspaceId);

    expect(afterDelivered).toEqual({ status: 'delivered', error: null });
    expect(afterLate).toEqual({ status: 'read', error: null });
  });

  it('when a failed status arrives, then the message fails with errors[0]', async () => {
    const { ws, meta, wamid, phone } = await sentMessage();
    const errors = [
      {
        code: 131047,
        title: 'Re-engagement message',
        message: 'Re-engagement message',
        error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' },
        href: '/docs/whatsapp/cloud-api/support/error-codes/',
      },
    ];

    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { statuses: [whatsappStatus(wamid, 'failed', phone.slice(1), errors)] }), {
      appSecret: meta.appSecret,
    });

    expect(await statusOf(ws.workspaceId)).toEqual({
      status: 'failed',
      error: {
        code: '131047',
        message: 'Re-engagement message: Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
      },
    });
  });

  it('when a status arrives before the answer to its send, then it is held and applied once the message has its id, in the order the statuses came', async () => {
    const { ws, meta } = await whatsappChannel();
    const phone = buildPhone();
    const wamid = `wamid.early${Date.now()}`;
    // Meta calls back about the message while its answer to the send is still on its way.
    graph.answer((request) =>
      request.externalId === meta.externalId
        ? {
            status: 200,
            body: { messaging_product: 'whatsapp', contacts: [{ input: request.body.to, wa_id: request.body.to }], messages: [{ id: wamid }] },
            delayMs: 400,
          }
        : undefined,
    );
    try {
      const { data: contact } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
      const { data: message } = await ws.api.POST('/messages', {
        body: { contactId: contact!.id, channelId: meta.channel.id, template: { name: 'hello_world', language: 'en_US' } },
      });
      await waitFor('the send', () => graph.to(meta.externalId).length === 1);
      const post = (status: string) =>
        postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { statuses: [whatsappStatus(wamid, status, phone.slice(1))] }), {
          appSecret: meta.appSecret,
        });

      const answers = [await post('delivered'), await post('read')];
      const whileSending = await statusOf(ws.workspaceId);
      await waitFor('read', async () => (await statusOf(ws.workspaceId)).status === 'read');
      const { data: events } = await ws.api.GET('/events', { params: { query: { type: 'message.updated', limit: 10 } } });

      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(whileSending).toEqual({ status: 'queued', error: null });
      expect(
        events!.data
          .map((e) => e.data.object as { id: string; status: string })
          .map((m) => [m.id, m.status])
          .reverse(),
      ).toEqual([
        [message!.id, 'sent'],
        [message!.id, 'delivered'],
        [message!.id, 'read'],
      ]);
    } finally {
      graph.answer(undefined);
    }
  });

  it('when a status names a message the channel never sent, then it changes nothing, and is dropped after its last look', async () => {
    const { ws, meta, phone } = await sentMessage();
    const wamid = `wamid.unknown${Date.now()}`;
    const held = () =>
      server.db.selectFrom('jobs').select(['id', 'attempts']).where('workspace_id', '=', ws.workspaceId).where('queue', '=', 'early-status').execute();

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { statuses: [whatsappStatus(wamid, 'read', phone.slice(1))] }), {
      appSecret: meta.appSecret,
    });
    const heldAfterPost = await held();
    // Skip to the last look rather than wait the 16 s of backoff.
    await server.db.updateTable('jobs').set({ attempts: 4, run_at: new Date() }).where('id', '=', heldAfterPost[0]!.id).execute();
    await waitFor('the held status dropped', async () => (await held()).length === 0);

    expect(res.status).toBe(200);
    expect(heldAfterPost).toEqual([{ id: expect.any(String), attempts: 0 }]);
    expect(await statusOf(ws.workspaceId)).toEqual({ status: 'sent', error: null });
    expect(logs.lines.filter((l) => l.msg === 'a status of a message this channel never sent was dropped' && l.externalId === wamid)).toHaveLength(1);
  });
});

describe('POST /webhooks/meta/{channelId}: Instagram', () => {
  it("when a customer writes, then a contact with that instagramId gets the message; the account's echo is ignored", async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const customer = `1784${Date.now()}`;
    const inbound = instagramText(meta.externalId, customer, 'Vocês entregam em Campinas?');
    const echo = instagramText(meta.externalId, customer, 'Entregamos sim!', { echo: true });

    const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [inbound.event, echo.event]), { appSecret: meta.appSecret });
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [echo.event]), { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    const rows = await storedMessages(ws.workspaceId);
    expect(rows.map((m) => [m.direction, m.content, m.external_id])).toEqual([['inbound', 'Vocês entregam em Campinas?', inbound.mid]]);
    const contacts = await storedContacts(ws.workspaceId);
    expect(contacts.map((c) => [c.instagram_id, c.phone, c.name])).toEqual([[customer, null, `Instagram ${customer}`]]);
    const { data: byInstagramId } = await ws.api.GET('/contacts', { params: { query: { instagramId: customer } } });
    expect(byInstagramId!.data.map((c) => c.id)).toEqual([contacts[0]!.id]);
  });

  it("when an entry, or a message in the channel's entry, is for another Instagram account, then it is ignored and logged", async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const other = `1784${Date.now()}99`;
    const customer = `1784${Date.now()}1`;
    const mine = instagramText(meta.externalId, customer, 'Para vocês');
    const toOther = instagramText(other, customer, 'Para a outra conta');
    const inOtherEntry = instagramText(other, customer, 'Também para a outra');
    const payload = {
      object: 'instagram',
      entry: [
        { id: meta.externalId, time: Date.now(), messaging: [mine.event, toOther.event] },
        { id: other, time: Date.now(), messaging: [inOtherEntry.event] },
      ],
    };

    const res = await postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    expect((await storedMessages(ws.workspaceId)).map((m) => m.external_id)).toEqual([mine.mid]);
    expect(ignoredParts(meta.channel.id)).toEqual([
      [`an Instagram message to account ${other}, not this channel's`, `an entry for Instagram account ${other}, not this channel's`],
    ]);
  });

  it('when a WhatsApp delivery reaches an Instagram channel, then it is not understood and stores nothing', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, whatsappText(buildPhone().slice(1), 'Oi')), {
      appSecret: meta.appSecret,
    });

    expect(res.status).toBe(200);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });
});

describe('POST /webhooks/meta/{channelId}: items that cannot be stored', () => {
  const phones = () => Array.from({ length: 5 }, () => buildPhone().slice(1));

  it('when a WhatsApp batch mixes good messages with a text or a name holding U+0000 and ids too long to index, then it answers 200, stores the good ones and logs each bad one by its reason, never its content', async () => {
    const { ws, meta } = await whatsappChannel();
    const [a, b, c, d, e] = phones();
    const good = whatsappText(a!, 'Bom dia', 'Ana Souza');
    const nulText = whatsappText(b!, 'segredo\u0000do cliente', 'Bruno Lima');
    const nulName = whatsappText(c!, 'Oi, tudo bem?', 'Car\u0000la');
    const longId = whatsappText(d!, 'Oi', 'Davi Rocha', `wamid.${'A'.repeat(3000)}`);
    const last = whatsappText(e!, 'Tchau', 'Eva Dias');
    const parts = [good, nulText, nulName, longId, last];
    const payload = whatsappDelivery(meta.externalId, {
      contacts: parts.flatMap((p) => p.contacts),
      messages: parts.flatMap((p) => p.messages),
      statuses: [whatsappStatus(`wamid.${'B'.repeat(3000)}`, 'delivered', a!)],
    });

    const res = await postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    expect((await storedMessages(ws.workspaceId)).map((m) => [m.external_id, m.content])).toEqual([
      [good.id, 'Bom dia'],
      [nulName.id, 'Oi, tudo bem?'],
      [last.id, 'Tchau'],
    ]);
    // The name that cannot be stored is metadata: the phone names the contact.
    expect((await storedContacts(ws.workspaceId)).map((c) => [c.phone, c.name])).toEqual([
      [`+${a}`, 'Ana Souza'],
      [`+${c}`, `+${c}`],
      [`+${e}`, 'Eva Dias'],
    ]);
    expect(ignoredParts(meta.channel.id)).toEqual([
      [
        'a profile name that cannot be stored (U+0000, a lone surrogate, or too long): the phone names the contact',
        'a message whose text holds U+0000 or a lone surrogate, so it cannot be stored as sent',
        'a message whose id cannot be stored (over 1024 bytes, U+0000 or a lone surrogate)',
        'a status whose id or status cannot be stored (over 1024 bytes, U+0000 or a lone surrogate)',
      ],
    ]);
    const logged = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(logged).not.toContain('segredo');
    expect(logged).not.toContain('A'.repeat(100));
  });

  it('when an Instagram batch holds a text with U+0000, a mid too long to index or a sender that is no Instagram id beside a good message, then only the good one is stored, with 200', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const customer = `1784${Date.now()}2`;
    const good = instagramText(meta.externalId, customer, 'Vocês entregam em Campinas?');
    const nulText = instagramText(meta.externalId, customer, 'segredo\u0000do cliente');
    const longMid = instagramText(meta.externalId, customer, 'Oi');
    (longMid.event as { message: { mid: string } }).message.mid = 'aWdf'.repeat(800);
    const badSender = instagramText(meta.externalId, 'não é um id', 'Oi');

    const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [nulText.event, good.event, longMid.event, badSender.event]), {
      appSecret: meta.appSecret,
    });

    expect(res.status).toBe(200);
    expect((await storedMessages(ws.workspaceId)).map((m) => [m.external_id, m.content])).toEqual([[good.mid, 'Vocês entregam em Campinas?']]);
    expect(ignoredParts(meta.channel.id)).toEqual([
      [
        'an Instagram message whose text holds U+0000 or a lone surrogate, so it cannot be stored as sent',
        'an Instagram message whose mid cannot be stored (over 1024 bytes, U+0000 or a lone surrogate)',
        'an Instagram message whose sender is not an Instagram-scoped id',
      ],
    ]);
  });

  describe('when the database refuses what the parser let through', () => {
    // The database's own refusal, of a value no check foresaw: a trigger refuses a message whose
    // content is `refuse:<SQLSTATE>` with that SQLSTATE.
    beforeAll(async () => {
      await sql`create function test_refuse_marked_message() returns trigger language plpgsql as $$
        begin
          if new.content like 'refuse:%' then
            raise exception 'refused by a test' using errcode = substr(new.content, 8, 5);
          end if;
          return new;
        end $$`.execute(server.db);
      await sql`create trigger test_refuse_marked_message before insert on messages for each row execute function test_refuse_marked_message()`.execute(
        server.db,
      );
    });
    afterAll(async () => {
      await sql`drop trigger test_refuse_marked_message on messages`.execute(server.db);
      await sql`drop function test_refuse_marked_message()`.execute(server.db);
    });

    it('when it is a data error, then that item alone is skipped and logged, the rest is stored and Meta gets 200', async () => {
      const { ws, meta } = await whatsappChannel();
      const [a, b, c] = phones();
      const parts = [whatsappText(a!, 'Primeira', 'Ana'), whatsappText(b!, 'refuse:22023', 'Bruno'), whatsappText(c!, 'Terceira', 'Carla')];
      const payload = whatsappDelivery(meta.externalId, { contacts: parts.flatMap((p) => p.contacts), messages: parts.flatMap((p) => p.messages) });

      const res = await postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret });
      const again = await postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret });

      expect([res.status, again.status]).toEqual([200, 200]);
      expect((await storedMessages(ws.workspaceId)).map((m) => m.content)).toEqual(['Primeira', 'Terceira']);
      const skipped = logs.lines.filter((l) => l.msg === 'webhook delivery: an item the database refused was skipped' && l.channelId === meta.channel.id);
      expect(skipped.map((l) => [l.item, l.kind, l.sqlstate])).toEqual([
        [1, 'message', '22023'],
        [1, 'message', '22023'],
      ]);
    });

    it.each([
      ['a statement timeout', '57014'],
      ['a serialization failure', '40001'],
      ['a deadlock', '40P01'],
    ])('when it is not a data error (%s), then the delivery answers 503 and stores nothing, for Meta to retry', async (_what, sqlstate) => {
      const { ws, meta } = await whatsappChannel();
      const [a, b] = phones();
      const parts = [whatsappText(a!, 'Primeira', 'Ana'), whatsappText(b!, `refuse:${sqlstate}`, 'Bruno')];
      const payload = whatsappDelivery(meta.externalId, { contacts: parts.flatMap((p) => p.contacts), messages: parts.flatMap((p) => p.messages) });

      const res = await postWebhook(server, meta.channel.id, payload, { appSecret: meta.appSecret });

      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('service_unavailable');
      expect(await storedMessages(ws.workspaceId)).toEqual([]);
      expect(await storedContacts(ws.workspaceId)).toEqual([]);
    });
  });
});
