// NPS asked in the conversation: POST /threads/{id}/nps/request sends the workspace's question
// (Instagram quick replies, WhatsApp text or template: the exact Graph requests), and the customer's
// next message that is a score answers it on the asked thread (signed Meta webhooks and the
// sandbox), with nps.answered (source conversation), the thanks and the statistics; what is a
// score (pure rule); 409s, expiry, concurrency and Meta's duplicates. Graph is the only double.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { NPS_QUICK_REPLIES, npsRequestPending, scoreOfPayload, scoreOfReply, scoreOfText } from '../src/services/nps-requests.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, request, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, instagramDelivery, instagramQuickReply, instagramText, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Thread = components['schemas']['Thread'];
type Message = components['schemas']['Message'];
type Event = components['schemas']['Event'];

const QUESTION = 'Em uma escala de 0 a 10, o quanto você recomendaria nosso atendimento a um amigo?';
const THANKS = 'Obrigado pela sua resposta!';

let graph: GraphDouble;
let server: TestServer;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  graph = await GraphDouble.start();
  // Its workers take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({
    databaseUrl: own?.url,
    jobs: true,
    config: { metaGraphUrl: graph.url, retryBaseMs: 20, retryMaxAttempts: 4, metaGraphTimeoutMs: 1_500, jobLeaseMs: 5_000, jobPollMs: 200 },
  });
});
afterAll(async () => {
  await server.close();
  await graph.close();
  await own?.drop();
});

// ---------------------------------------------------------------------------------------------
// Arranging.

/** A WhatsApp customer who wrote `text` on the channel (a signed webhook): their contact and open thread. */
async function whatsappCustomer(ws: TestWorkspace, meta: MetaChannel, text = 'Oi, meu pedido chegou!'): Promise<{ phone: string; thread: Thread }> {
  const phone = buildPhone();
  await whatsappWrites(meta, phone, text);
  const { data } = await ws.api.GET('/threads', { params: { query: { channelId: meta.channel.id } } });
  const thread = data!.data.find((t) => t.lastInboundAt !== null && t.status === 'open' && !t.npsRequestedAt)!;
  return { phone, thread };
}

async function whatsappWrites(meta: MetaChannel, phone: string, text: string, id?: string): Promise<number> {
  const inbound = whatsappText(phone.slice(1), text, 'Mariana Silva', id);
  const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
  return res.status;
}

let igSequence = 0;
/** An Instagram customer who wrote on the channel: their Instagram-scoped id and open thread. */
async function instagramCustomer(ws: TestWorkspace, meta: MetaChannel): Promise<{ igsid: string; thread: Thread }> {
  const igsid = `${Date.now()}${igSequence++}`;
  const { event } = instagramText(meta.externalId, igsid, 'Oi! Vocês entregam em Campinas?');
  const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
  expect(res.status).toBe(200);
  const contact = await contactOf(ws, { instagramId: igsid });
  const { data } = await ws.api.GET('/threads', { params: { query: { contactId: contact } } });
  return { igsid, thread: data!.data[0]! };
}

async function contactOf(ws: TestWorkspace, by: { phone?: string; instagramId?: string }): Promise<string> {
  const row = await server.db
    .selectFrom('contacts')
    .select('id')
    .where('workspace_id', '=', ws.workspaceId)
    .where(by.phone ? 'phone' : 'instagram_id', '=', (by.phone ?? by.instagramId)!)
    .executeTakeFirstOrThrow();
  return row.id;
}

const ask = (ws: TestWorkspace, threadId: string, headers?: Record<string, string>) =>
  request(server, 'POST', `/v1/threads/${threadId}/nps/request`, { headers: { authorization: `Bearer ${ws.apiKey}`, ...headers } });

async function askOk(ws: TestWorkspace, threadId: string): Promise<Thread> {
  const res = await ask(ws, threadId);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as Thread;
}

const getThread = async (ws: TestWorkspace, id: string): Promise<Thread> => (await ws.api.GET('/threads/{id}', { params: { path: { id } } })).data!;

async function messagesOf(ws: TestWorkspace, threadId: string): Promise<Message[]> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });
  return data!.data;
}

async function threadsOf(ws: TestWorkspace, contactId: string): Promise<Thread[]> {
  const { data } = await ws.api.GET('/threads', { params: { query: { contactId } } });
  return data!.data;
}

async function eventsOf(ws: TestWorkspace, type: Event['type']): Promise<Event[]> {
  const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
  return data!.data;
}

/** The Graph requests to the channel whose body holds `text` (WhatsApp text body or Instagram message text). */
const graphSends = (meta: MetaChannel, text: string) =>
  graph.to(meta.externalId).filter((r) => r.body?.text?.body === text || r.body?.message?.text === text || r.body?.type === 'template');

async function waitForGraph(meta: MetaChannel, text: string, count = 1): Promise<void> {
  await waitFor(`${count} Graph request(s) with "${text}"`, () => graphSends(meta, text).length >= count);
}

/** The thread's request sent `hours` earlier than it was (its expiry is judged from nps_requested_at). */
async function backdateRequest(threadId: string, hours: number): Promise<void> {
  await sql`update threads set nps_requested_at = nps_requested_at - make_interval(hours => ${hours}) where id = ${threadId}`.execute(server.db);
}

const jobsOf = (workspaceId: string) => server.db.selectFrom('jobs').select('queue').where('workspace_id', '=', workspaceId).execute();

// ---------------------------------------------------------------------------------------------
// The pure rules.

describe('scoreOfText', () => {
  it.each([
    ['9', 9],
    [' 10! ', 10],
    ['10.', 10],
    ['0', 0],
    ['(8)', 8],
    ['7 !!', 7],
    ['\n5\n', 5],
    ['09', 9],
    ['obrigado', undefined],
    ['10 reais', undefined],
    ['nota 9', undefined],
    ['11', undefined],
    ['100', undefined],
    ['-1', undefined],
    ['- 3', undefined],
    ['9/10', undefined],
    ['1.5', undefined],
    ['9 😊', undefined],
    ['', undefined],
    ['!!', undefined],
  ])('when the text is %j, then its score is %s', (text, score) => {
    expect(scoreOfText(text)).toBe(score);
  });
});

describe('scoreOfPayload and scoreOfReply', () => {
  it('when a payload is NPS_0..NPS_10, then it is that score; anything else is none', () => {
    expect(NPS_QUICK_REPLIES.map((r) => scoreOfPayload(r.payload))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(['NPS_11', 'NPS_', 'nps_9', 'NPS_9 ', 'OTHER_9'].map(scoreOfPayload)).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });

  it('when a reply has a quick-reply payload, then the payload decides; a message with files is not a score', () => {
    expect(scoreOfReply({ content: 'Muito bom', quickReplyPayload: 'NPS_10' })).toBe(10);
    expect(scoreOfReply({ content: '8', quickReplyPayload: 'MENU_2' })).toBe(8);
    expect(scoreOfReply({ content: '9', media: [{}] })).toBeUndefined();
    expect(scoreOfReply({ content: null })).toBeUndefined();
  });

  it('when a request is younger than expiresAfterHours, then it is pending; at the hour or never sent, it is not', () => {
    const now = new Date('2026-11-20T12:00:00.000Z');
    expect(npsRequestPending(new Date('2026-11-19T12:00:00.001Z'), now, 24)).toBe(true);
    expect(npsRequestPending(new Date('2026-11-19T12:00:00.000Z'), now, 24)).toBe(false);
    expect(npsRequestPending(null, now, 24)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// Asking.

describe('POST /threads/{id}/nps/request', () => {
  it('when asked on Instagram, then Graph gets the question with quick replies 0..10 and the thread answers 200 with npsRequestedAt', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { igsid, thread } = await instagramCustomer(ws, meta);

    const asked = await askOk(ws, thread.id);

    expect(asked).toEqual({ ...asked, id: thread.id, status: 'open', npsScore: null, npsRequestedAt: expect.stringMatching(ISO_MS) });
    expect(asked.lastMessageAt).toBe(asked.npsRequestedAt);
    expect(await getThread(ws, thread.id)).toEqual(asked);
    await waitForGraph(meta, QUESTION);
    const [question] = graphSends(meta, QUESTION);
    expect(question).toMatchObject({ method: 'POST', path: `/v23.0/${meta.externalId}/messages`, authorization: `Bearer ${meta.accessToken}` });
    expect(question!.body).toEqual({
      recipient: { id: igsid },
      messaging_type: 'RESPONSE',
      message: {
        text: QUESTION,
        quick_replies: Array.from({ length: 11 }, (_, n) => ({ content_type: 'text', title: String(n), payload: `NPS_${n}` })),
      },
    });
    const outbound = (await messagesOf(ws, thread.id)).filter((m) => m.direction === 'outbound');
    expect(outbound).toEqual([expect.objectContaining({ content: QUESTION, threadId: thread.id, template: null })]);
    const created = (await eventsOf(ws, 'message.created')).find((e) => (e.data.object as Message).id === outbound[0]!.id)!;
    expect(created.data.actor).toEqual({ type: 'api_key', id: ws.keyId });
  });

  it('when asked on WhatsApp inside the window, then Graph gets the question as text', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);

    await askOk(ws, thread.id);

    await waitForGraph(meta, QUESTION);
    expect(graphSends(meta, QUESTION).map((r) => r.body)).toEqual([
      { messaging_product: 'whatsapp', recipient_type: 'individual', to: phone.slice(1), type: 'text', text: { body: QUESTION } },
    ]);
  });

  it('when asked on WhatsApp outside the window with a template set, then Graph gets the template', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const phone = buildPhone();
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: meta.channel.id } });
    const settings = await ws.api.PATCH('/settings', {
      body: { nps: { question: QUESTION, thanks: THANKS, template: { name: 'pesquisa_nps', language: 'pt_BR' }, expiresAfterHours: 24 } },
    });
    expect(settings.response.status).toBe(200);

    const asked = await askOk(ws, thread!.id);

    expect(asked.npsRequestedAt).toMatch(ISO_MS);
    await waitFor('the template sent', () => graph.to(meta.externalId).length === 1);
    expect(graph.to(meta.externalId).map((r) => r.body)).toEqual([
      {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: phone.slice(1),
        type: 'template',
        template: { name: 'pesquisa_nps', language: { code: 'pt_BR' } },
      },
    ]);
    expect(await messagesOf(ws, thread!.id)).toEqual([
      expect.objectContaining({ content: '[template pesquisa_nps]', template: { name: 'pesquisa_nps', language: 'pt_BR' } }),
    ]);
  });

  it('when asked on WhatsApp outside the window without a template, then 422 outside_messaging_window and nothing is queued or set', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: meta.channel.id } });

    const res = await ask(ws, thread!.id);

    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'outside_messaging_window', details: [{ path: '/path/id' }] } });
    expect(await getThread(ws, thread!.id)).toEqual(thread);
    expect(await messagesOf(ws, thread!.id)).toEqual([]);
    expect(await jobsOf(ws.workspaceId)).toEqual([]);
  });

  it('when asked on Instagram more than 24 hours after the contact wrote, then 422 outside_messaging_window and nothing is queued', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { thread } = await instagramCustomer(ws, meta);
    await sql`update threads set last_inbound_at = now() - interval '25 hours' where id = ${thread.id}`.execute(server.db);
    const before = await getThread(ws, thread.id);

    const res = await ask(ws, thread.id);

    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'outside_messaging_window' } });
    expect(await getThread(ws, thread.id)).toEqual(before);
    expect((await messagesOf(ws, thread.id)).filter((m) => m.direction === 'outbound')).toEqual([]);
    expect((await jobsOf(ws.workspaceId)).filter((j) => j.queue === 'message-delivery')).toEqual([]);
  });

  it('when the contact never wrote on Instagram, then 422 outside_messaging_window; with neither phone nor BSUID on WhatsApp, 422 contact_unreachable, on a sandbox channel too', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const sandbox = ws.channels.find((c) => c.type === 'whatsapp')!;
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Nunca escreveu' } });
    const { data: onInstagram } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: meta.channel.id } });
    const { data: onWhatsapp } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: sandbox.id } });

    const instagram = await ask(ws, onInstagram!.id);
    const whatsapp = await ask(ws, onWhatsapp!.id);

    expect([instagram.status, instagram.body.error.code]).toEqual([422, 'outside_messaging_window']);
    expect([whatsapp.status, whatsapp.body.error.code]).toEqual([422, 'contact_unreachable']);
    expect((await getThread(ws, onInstagram!.id)).npsRequestedAt).toBeNull();
    expect((await getThread(ws, onWhatsapp!.id)).npsRequestedAt).toBeNull();
    expect((await jobsOf(ws.workspaceId)).filter((j) => j.queue === 'message-delivery')).toEqual([]);
  });

  it('when the thread was asked and is still pending, or was answered, then 409 conflict; once expired, it may be asked again', async () => {
    const ws = await createWorkspace(server);
    const sandbox = ws.channels[0]!;
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: sandbox.id } });
    const first = await askOk(ws, thread!.id);

    const pending = await ask(ws, thread!.id);
    await backdateRequest(thread!.id, 24);
    const again = await askOk(ws, thread!.id);
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread!.id } }, body: { score: 7 } });
    const answered = await ask(ws, thread!.id);

    expect(pending.status).toBe(409);
    expect(pending.body).toMatchObject({ error: { code: 'conflict', details: [{ path: '/path/id', message: expect.stringContaining('pending until') }] } });
    expect(Date.parse(again.npsRequestedAt!)).toBeGreaterThan(Date.parse(first.npsRequestedAt!));
    expect(answered.status).toBe(409);
    expect(answered.body).toMatchObject({ error: { code: 'conflict', message: 'This thread already has an NPS answer.' } });
    expect((await messagesOf(ws, thread!.id)).map((m) => m.content)).toEqual([QUESTION, QUESTION]);
  });

  it('when two requests for one thread arrive at once, then one asks (200) and the other is 409, with one question', async () => {
    const ws = await createWorkspace(server);
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });

    const answers = await Promise.all([ask(ws, thread!.id), ask(ws, thread!.id), ask(ws, thread!.id)]);

    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
    expect((await messagesOf(ws, thread!.id)).map((m) => m.content)).toEqual([QUESTION]);
  });

  it('when the id is unknown, another workspace’s or not a UUID, or the key lacks the scope or is missing, then 404, 404, 400, 403, 401 and nothing is sent', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const { data: contact } = await other.api.POST('/contacts', { body: buildContact() });
    const { data: foreign } = await other.api.POST('/threads', { body: { contactId: contact!.id, channelId: other.channels[0]!.id } });
    const reader = await createWorkspace(server, { scopes: ['messages:read'] });

    const unknown = await ask(ws, '01935f5f-2b3c-7d4e-9f5a-6b7c8d9e0f1a');
    const theirs = await ask(ws, foreign!.id);
    const malformed = await ask(ws, 'not-a-uuid');
    const scoped = await ask(reader, foreign!.id);
    const anonymous = await request(server, 'POST', `/v1/threads/${foreign!.id}/nps/request`);

    expect([unknown, theirs, malformed, scoped, anonymous].map((r) => [r.status, (r.body as { error: { code: string } }).error.code])).toEqual([
      [404, 'not_found'],
      [404, 'not_found'],
      [400, 'validation_error'],
      [403, 'forbidden'],
      [401, 'unauthorized'],
    ]);
    expect(await getThread(other, foreign!.id)).toEqual(foreign);
    expect(await messagesOf(other, foreign!.id)).toEqual([]);
  });

  it('when sent with an Idempotency-Key twice, then the second replays the first 200', async () => {
    const ws = await createWorkspace(server);
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });

    const first = await ask(ws, thread!.id, { 'idempotency-key': 'nps-ask-1' });
    const replay = await ask(ws, thread!.id, { 'idempotency-key': 'nps-ask-1' });

    expect(first.status).toBe(200);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(await messagesOf(ws, thread!.id)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// Answering.

describe('a score in the conversation', () => {
  it('when the customer answers "9" on WhatsApp, then the thread has npsScore 9, nps.answered says conversation, the thanks goes out and the statistics count it', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    const asked = await askOk(ws, thread.id);
    await waitForGraph(meta, QUESTION);

    expect(await whatsappWrites(meta, phone, '9')).toBe(200);

    const answered = await getThread(ws, thread.id);
    expect(answered).toEqual({
      ...asked,
      npsScore: 9,
      npsCreatedAt: expect.stringMatching(ISO_MS),
      lastMessageAt: expect.stringMatching(ISO_MS),
      lastInboundAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    });
    const [event, ...more] = await eventsOf(ws, 'nps.answered');
    expect(more).toEqual([]);
    expect(event!.data).toEqual({ object: answered, actor: { type: 'system', id: null }, source: 'conversation' });
    expect((await ws.api.GET('/events/{id}', { params: { path: { id: event!.id } } })).data).toEqual(event);
    const messages = await messagesOf(ws, thread.id);
    expect(messages.map((m) => [m.direction, m.content])).toEqual([
      ['inbound', 'Oi, meu pedido chegou!'],
      ['outbound', QUESTION],
      ['inbound', '9'],
      ['outbound', THANKS],
    ]);
    await waitForGraph(meta, THANKS);
    expect(graphSends(meta, THANKS).map((r) => r.body)).toEqual([
      { messaging_product: 'whatsapp', recipient_type: 'individual', to: phone.slice(1), type: 'text', text: { body: THANKS } },
    ]);
    await waitFor('the question and the thanks sent', async () => (await messagesOf(ws, thread.id)).every((m) => m.status !== 'queued'));
    expect((await messagesOf(ws, thread.id)).filter((m) => m.direction === 'outbound').map((m) => m.status)).toEqual(['sent', 'sent']);
    const day = answered.npsCreatedAt!.slice(0, 10);
    const window = { workspaceId: ws.workspaceId, dateFrom: `${day}T00:00:00.000Z`, dateTo: `${day}T23:59:59.999Z` };
    const { data: stats } = await ws.api.GET('/threads/stats/nps', { params: { query: window } });
    expect(stats).toEqual({ promotores: 1, neutros: 0, detratores: 0, total: 1, npsScore: 100 });
    const { data: byStage } = await ws.api.GET('/threads/stats/nps', { params: { query: { ...window, groupBy: 'stage' } } });
    expect(byStage!.groups).toEqual([{ key: thread.stageId, promotores: 1, neutros: 0, detratores: 0, total: 1, npsScore: 100 }]);
  });

  it('when the customer taps the quick reply 10 on Instagram, then its payload NPS_10 is the answer', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const { igsid, thread } = await instagramCustomer(ws, meta);
    await askOk(ws, thread.id);
    const { event } = instagramQuickReply(meta.externalId, igsid, 'Excelente', 'NPS_10');

    const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: 10 });
    const messages = await messagesOf(ws, thread.id);
    expect(messages.map((m) => m.content)).toEqual(['Oi! Vocês entregam em Campinas?', QUESTION, 'Excelente', THANKS]);
    // The answer keeps the quick reply it tapped, as any customer's message does.
    expect(messages[2]!.interactive).toEqual({ reply: { id: 'NPS_10', title: 'Excelente' } });
    await waitForGraph(meta, THANKS);
    expect(graphSends(meta, THANKS).map((r) => r.body)).toEqual([{ recipient: { id: igsid }, message: { text: THANKS } }]);
  });

  it('when the customer answers on WhatsApp quoting the question, then the answer replies to the question', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    await askOk(ws, thread.id);
    await waitForGraph(meta, QUESTION);
    await waitFor('the question sent', async () => (await messagesOf(ws, thread.id)).find((m) => m.content === QUESTION)?.externalId != null);
    const question = (await messagesOf(ws, thread.id)).find((m) => m.content === QUESTION)!;
    const inbound = whatsappText(phone.slice(1), '10', 'Mariana Silva');
    (inbound.messages[0] as { context?: unknown }).context = { from: meta.externalId, id: question.externalId };

    expect((await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret })).status).toBe(200);

    expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: 10 });
    const answer = (await messagesOf(ws, thread.id)).find((m) => m.content === '10')!;
    expect(answer.replyTo).toBe(question.id);
  });

  it('when a closed thread is asked and answered " 10! ", then it stays closed, no thread opens, and question, score and thanks are its messages', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    const { data: closed } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread.id } }, body: { status: 'closed' } });
    await askOk(ws, thread.id);

    expect(await whatsappWrites(meta, phone, ' 10! ')).toBe(200);

    const after = await getThread(ws, thread.id);
    expect(after).toMatchObject({ status: 'closed', closedAt: closed!.closedAt, npsScore: 10 });
    expect(await threadsOf(ws, thread.contactId)).toEqual([after]);
    expect((await messagesOf(ws, thread.id)).map((m) => m.content)).toEqual(['Oi, meu pedido chegou!', QUESTION, ' 10! ', THANKS]);
    expect(await eventsOf(ws, 'thread.created')).toHaveLength(1);
  });

  it('when the customer writes "obrigado" first, then it is an ordinary message (a new thread) and the request stays pending until "8" answers it', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread.id } }, body: { status: 'closed' } });
    const asked = await askOk(ws, thread.id);

    await whatsappWrites(meta, phone, 'obrigado');
    await whatsappWrites(meta, phone, '10 reais');
    const [opened] = (await threadsOf(ws, thread.contactId)).filter((t) => t.id !== thread.id);

    expect(opened).toMatchObject({ status: 'open', npsRequestedAt: null });
    expect((await messagesOf(ws, opened!.id)).map((m) => m.content)).toEqual(['obrigado', '10 reais']);
    expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: null, npsRequestedAt: asked.npsRequestedAt, status: 'closed' });
    expect(await eventsOf(ws, 'nps.answered')).toEqual([]);

    await whatsappWrites(meta, phone, '8');

    expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: 8, status: 'closed' });
    expect((await messagesOf(ws, opened!.id)).map((m) => m.content)).toEqual(['obrigado', '10 reais']);
    expect((await messagesOf(ws, thread.id)).map((m) => m.content).slice(-2)).toEqual(['8', THANKS]);
  });

  it('when the request expired, then a score is an ordinary message, and the thread may be asked again', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    await askOk(ws, thread.id);
    await backdateRequest(thread.id, 24);

    await whatsappWrites(meta, phone, '9');

    expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: null });
    expect((await messagesOf(ws, thread.id)).map((m) => m.content)).toEqual(['Oi, meu pedido chegou!', QUESTION, '9']);
    expect(await eventsOf(ws, 'nps.answered')).toEqual([]);
    expect((await ask(ws, thread.id)).status).toBe(200);
  });

  it('when two scores arrive at once, then one is the answer and the other an ordinary message, with one nps.answered', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread.id } }, body: { status: 'closed' } });
    await askOk(ws, thread.id);

    const statuses = await Promise.all([whatsappWrites(meta, phone, '9'), whatsappWrites(meta, phone, '3')]);

    expect(statuses).toEqual([200, 200]);
    const answered = await getThread(ws, thread.id);
    expect([9, 3]).toContain(answered.npsScore);
    const other = answered.npsScore === 9 ? '3' : '9';
    expect(await eventsOf(ws, 'nps.answered')).toHaveLength(1);
    const threads = await threadsOf(ws, thread.contactId);
    expect(threads).toHaveLength(2);
    const opened = threads.find((t) => t.id !== thread.id)!;
    expect((await messagesOf(ws, opened.id)).map((m) => m.content)).toEqual([other]);
    expect((await messagesOf(ws, thread.id)).filter((m) => m.content === THANKS)).toHaveLength(1);
  });

  it('when Meta delivers the same score twice (one message id), in turn or at once, then it is one message and one answer', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const first = await whatsappCustomer(ws, meta);
    const second = await whatsappCustomer(ws, meta);
    await askOk(ws, first.thread.id);
    await askOk(ws, second.thread.id);
    const inTurn = `wamid.HBgMnps${Date.now()}a`;
    const atOnce = `wamid.HBgMnps${Date.now()}b`;

    expect(await whatsappWrites(meta, first.phone, '9', inTurn)).toBe(200);
    expect(await whatsappWrites(meta, first.phone, '9', inTurn)).toBe(200);
    expect(await Promise.all([whatsappWrites(meta, second.phone, '6', atOnce), whatsappWrites(meta, second.phone, '6', atOnce)])).toEqual([200, 200]);

    for (const { thread, score } of [
      { thread: first.thread, score: 9 },
      { thread: second.thread, score: 6 },
    ]) {
      expect(await getThread(ws, thread.id)).toMatchObject({ npsScore: score });
      expect(await threadsOf(ws, thread.contactId)).toHaveLength(1);
      expect((await messagesOf(ws, thread.id)).map((m) => m.content)).toEqual(['Oi, meu pedido chegou!', QUESTION, String(score), THANKS]);
    }
    expect(await eventsOf(ws, 'nps.answered')).toHaveLength(2);
  });

  it('when a score arrives with a wrong signature, then 401 invalid_signature, nothing is stored and the request stays pending', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const { phone, thread } = await whatsappCustomer(ws, meta);
    const asked = await askOk(ws, thread.id);
    const inbound = whatsappText(phone.slice(1), '9', 'Mariana Silva');

    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: 'not-the-app-secret' });

    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { code: 'invalid_signature' } });
    expect(await getThread(ws, thread.id)).toEqual(asked);
    expect((await messagesOf(ws, thread.id)).map((m) => m.content)).toEqual(['Oi, meu pedido chegou!', QUESTION]);
  });

  it('when the customer answers on the sandbox, then it is the answer as on Meta, and POST /threads/{id}/nps records source api', async () => {
    const ws = await createWorkspace(server);
    const sandbox = ws.channels.find((c) => c.type === 'whatsapp')!;
    const phone = buildPhone();
    const { data: hello } = await ws.api.POST('/channels/{id}/sandbox/inbound', { params: { path: { id: sandbox.id } }, body: { from: phone, content: 'Oi' } });
    await askOk(ws, hello!.threadId);

    const { data: score, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: sandbox.id } },
      body: { from: phone, content: '7.' },
    });

    expect(response.status).toBe(201);
    expect(score).toMatchObject({ threadId: hello!.threadId, direction: 'inbound', content: '7.' });
    expect(await getThread(ws, hello!.threadId)).toMatchObject({ npsScore: 7 });
    expect((await messagesOf(ws, hello!.threadId)).map((m) => m.content)).toEqual(['Oi', QUESTION, '7.', THANKS]);
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: other } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: sandbox.id } });
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: other!.id } }, body: { score: 5 } });
    const sources = (await eventsOf(ws, 'nps.answered')).map((e) => [(e.data.object as Thread).id, (e.data as { source: string }).source]);
    expect(sources).toEqual([
      [other!.id, 'api'],
      [hello!.threadId, 'conversation'],
    ]);
  });
});
