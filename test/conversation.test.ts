// In the conversation (issue 36): quoted replies both ways, buttons and lists (Meta's limits refused
// as 400s naming the field), a customer's taps as `interactive.reply` routed by automations on
// `message.replyId`, reactions as annotations of the message (never messages), and marking read with
// typing, for people (POST /threads/{id}/read) and AI agents. Real PostgreSQL and workers; the Graph
// double checks every body against Meta's documented shapes and refuses the others as Graph does.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, buildHuman, buildPhone, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { AiDouble, textAnswer } from './helpers/ai.js';
import { createAutomation } from './helpers/automations.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, graphError, instagramDelivery, instagramQuickReply, instagramText, whatsappDelivery, whatsappText } from './helpers/graph.js';
import { graphBodyProblem } from './helpers/graph-shapes.js';
import { waitFor } from './helpers/processes.js';
import { ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];
type MessageCreate = components['schemas']['MessageCreate'];

const API_KEY = 'sk-test-conversation';
let graph: GraphDouble;
let ai: AiDouble;
let server: TestServer;
let own: OwnDatabase;
beforeAll(async () => {
  graph = await GraphDouble.start();
  ai = await AiDouble.start();
  // Its workers take every job of their database: one of their own.
  own = await ownDatabase();
  server = await startServer({
    databaseUrl: own.url,
    jobs: true,
    config: {
      metaGraphUrl: graph.url,
      aiBaseUrl: ai.url,
      aiApiKey: API_KEY,
      aiReplyDelayMs: 100,
      retryBaseMs: 20,
      retryMaxAttempts: 4,
      metaGraphTimeoutMs: 1_500,
      jobLeaseMs: 5_000,
      jobPollMs: 200,
    },
  });
});
afterAll(async () => {
  await server?.close();
  await graph?.close();
  await ai?.close();
  await own?.drop();
});

const MENU = {
  type: 'buttons' as const,
  header: 'Loja Exemplo',
  body: 'Como podemos ajudar?',
  footer: 'Atendimento das 8h às 20h',
  buttons: [
    { id: 'segunda_via', title: '2ª via do boleto' },
    { id: 'falar_atendente', title: 'Falar com atendente' },
  ],
};

const LIST = {
  type: 'list' as const,
  body: 'Escolha o assunto do seu atendimento.',
  button: 'Ver opções',
  sections: [
    {
      title: 'Pedidos',
      rows: [
        { id: 'rastrear', title: 'Rastrear pedido', description: 'Onde está a minha entrega' },
        { id: 'trocar', title: 'Trocar ou devolver' },
      ],
    },
    { title: 'Financeiro', rows: [{ id: 'segunda_via', title: 'Segunda via do boleto' }] },
  ],
};

interface WhatsAppPair {
  ws: TestWorkspace;
  meta: MetaChannel;
  contactId: string;
  phone: string;
}

async function whatsappPair(ws?: TestWorkspace): Promise<WhatsAppPair> {
  ws ??= await createWorkspace(server);
  const meta = await createMetaChannel(ws, 'whatsapp');
  const phone = buildPhone();
  const { data } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
  return { ws, meta, contactId: data!.id, phone };
}

/** A WhatsApp delivery of one message object from the pair's contact; its wamid. */
async function whatsappMessage(pair: WhatsAppPair, message: Record<string, unknown>, id = `wamid.HBgM${randomUUID().replaceAll('-', '')}`): Promise<string> {
  const payload = whatsappDelivery(pair.meta.externalId, {
    contacts: [{ profile: { name: 'Mariana Silva' }, wa_id: pair.phone.slice(1) }],
    messages: [{ from: pair.phone.slice(1), id, timestamp: String(Math.floor(Date.now() / 1000)), ...message }],
  });
  const res = await postWebhook(server, pair.meta.channel.id, payload, { appSecret: pair.meta.appSecret });
  expect(res.status).toBe(200);
  return id;
}

async function whatsappInbound(pair: WhatsAppPair, text = 'Oi, preciso de ajuda'): Promise<Message> {
  const inbound = whatsappText(pair.phone.slice(1), text, 'Mariana Silva');
  const res = await postWebhook(server, pair.meta.channel.id, whatsappDelivery(pair.meta.externalId, inbound), { appSecret: pair.meta.appSecret });
  expect(res.status).toBe(200);
  return (await byExternalId(pair.ws, inbound.id))!;
}

async function byExternalId(ws: TestWorkspace, externalId: string): Promise<Message | undefined> {
  const row = await server.db.selectFrom('messages').select(['id', 'thread_id']).where('external_id', '=', externalId).executeTakeFirst();
  return row && (await threadMessages(ws, row.thread_id)).find((m) => m.id === row.id);
}

async function threadMessages(ws: TestWorkspace, threadId: string): Promise<Message[]> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });
  return data!.data;
}

async function send(ws: TestWorkspace, body: MessageCreate): Promise<Message> {
  const { data, response, error } = await ws.api.POST('/messages', { body });
  if (response.status !== 201) throw new Error(`POST /messages: ${response.status} ${JSON.stringify(error)}`);
  return data!;
}

async function waitForSent(ws: TestWorkspace, message: Message): Promise<Message> {
  let current = message;
  await waitFor(`message ${message.id} sent`, async () => {
    current = (await threadMessages(ws, message.threadId)).find((m) => m.id === message.id)!;
    return current.status !== 'queued';
  });
  expect(current.status, JSON.stringify(current.error)).toBe('sent');
  return current;
}

const jobCount = async (workspaceId: string): Promise<number> =>
  Number(
    (
      await server.db
        .selectFrom('jobs')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirstOrThrow()
    ).n,
  );

async function messageEvents(ws: TestWorkspace, type: 'message.updated' | 'message.created'): Promise<Message[]> {
  const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
  return data!.data.map((event) => event.data.object as unknown as Message).reverse();
}

describe('buttons, lists and quoted replies on WhatsApp', () => {
  it('when buttons answer a customer message, then Graph gets Meta interactive button body quoting it, and the message shows body, buttons and replyTo', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);

    const queued = await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive: MENU, replyTo: question.id });

    expect(queued).toMatchObject({ content: 'Como podemos ajudar?', interactive: MENU, replyTo: question.id, reactions: [] });
    const sent = await waitForSent(pair.ws, queued);
    expect(sent.externalId).toMatch(/^wamid\./);
    const [request] = graph.to(pair.meta.externalId);
    expect(request!.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: pair.phone.slice(1),
      type: 'interactive',
      context: { message_id: question.externalId },
      interactive: {
        type: 'button',
        header: { type: 'text', text: 'Loja Exemplo' },
        body: { text: 'Como podemos ajudar?' },
        footer: { text: 'Atendimento das 8h às 20h' },
        action: {
          buttons: [
            { type: 'reply', reply: { id: 'segunda_via', title: '2ª via do boleto' } },
            { type: 'reply', reply: { id: 'falar_atendente', title: 'Falar com atendente' } },
          ],
        },
      },
    });
  });

  it('when a list is sent, then Graph gets Meta interactive list with its button, sections and rows', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);

    await waitForSent(pair.ws, await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive: LIST }));

    const [request] = graph.to(pair.meta.externalId);
    expect(request!.body.interactive).toEqual({
      type: 'list',
      body: { text: LIST.body },
      action: {
        button: 'Ver opções',
        sections: [
          {
            title: 'Pedidos',
            rows: [
              { id: 'rastrear', title: 'Rastrear pedido', description: 'Onde está a minha entrega' },
              { id: 'trocar', title: 'Trocar ou devolver' },
            ],
          },
          { title: 'Financeiro', rows: [{ id: 'segunda_via', title: 'Segunda via do boleto' }] },
        ],
      },
    });
  });

  it('when the customer taps a button, a list row or a template button, then each is a message with interactive.reply and the quoted message as replyTo', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const menu = await waitForSent(pair.ws, await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive: MENU }));

    const button = await whatsappMessage(pair, {
      context: { from: '15550783881', id: menu.externalId },
      type: 'interactive',
      interactive: { type: 'button_reply', button_reply: { id: 'falar_atendente', title: 'Falar com atendente' } },
    });
    const row = await whatsappMessage(pair, {
      type: 'interactive',
      interactive: { type: 'list_reply', list_reply: { id: 'rastrear', title: 'Rastrear pedido', description: 'Onde está a minha entrega' } },
    });
    const template = await whatsappMessage(pair, {
      context: { from: '15550783881', id: 'wamid.not-known-here' },
      type: 'button',
      button: { payload: 'confirmar_entrega', text: 'Confirmar' },
    });

    expect(await byExternalId(pair.ws, button)).toMatchObject({
      direction: 'inbound',
      content: 'Falar com atendente',
      interactive: { reply: { id: 'falar_atendente', title: 'Falar com atendente' } },
      replyTo: menu.id,
    });
    expect(await byExternalId(pair.ws, row)).toMatchObject({
      content: 'Rastrear pedido',
      interactive: { reply: { id: 'rastrear', title: 'Rastrear pedido' } },
      replyTo: null,
    });
    // The quoted message is not known here: replyTo stays null, the message is kept.
    expect(await byExternalId(pair.ws, template)).toMatchObject({
      content: 'Confirmar',
      interactive: { reply: { id: 'confirmar_entrega', title: 'Confirmar' } },
      replyTo: null,
    });
  });

  it('when the customer quotes our message in a text, then its replyTo is that message', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const ours = await waitForSent(pair.ws, await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'Seu pedido saiu.' }));

    const quoting = await whatsappMessage(pair, { context: { from: '15550783881', id: ours.externalId }, type: 'text', text: { body: 'Que horas chega?' } });

    expect(await byExternalId(pair.ws, quoting)).toMatchObject({ content: 'Que horas chega?', replyTo: ours.id, interactive: null });
  });

  it('when an automation tests message.replyId, then the tap on "Falar com atendente" hands the thread to a person and another tap does not', async () => {
    const pair = await whatsappPair();
    const { data: person } = await pair.ws.api.POST('/agents', { body: buildHuman({ name: 'Pedro Souza' }) });
    await createAutomation(pair.ws, {
      name: 'Falar com atendente',
      trigger: { event: 'message.received' },
      conditions: { all: [{ field: 'message.replyId', operator: 'equals', value: 'falar_atendente' }] },
      actions: [{ type: 'assign_agent', agentId: person!.id }],
    });
    const first = await whatsappInbound(pair);

    await whatsappMessage(pair, { type: 'interactive', interactive: { type: 'button_reply', button_reply: { id: 'segunda_via', title: '2ª via do boleto' } } });
    await whatsappMessage(pair, {
      type: 'interactive',
      interactive: { type: 'button_reply', button_reply: { id: 'falar_atendente', title: 'Falar com atendente' } },
    });

    await waitFor('the thread assigned to the person', async () => {
      const { data } = await pair.ws.api.GET('/threads/{id}', { params: { path: { id: first.threadId } } });
      return data!.agentId === person!.id;
    });
    const { data: history } = await pair.ws.api.GET('/threads/{id}/history', { params: { path: { id: first.threadId } } });
    expect(history!.data.filter((entry) => entry.field === 'agentId')).toHaveLength(1);
  });

  it('when the automation rule names message.replyId with a non-message trigger or a bad operator, then it is a 400', async () => {
    const ws = await createWorkspace(server);
    const wrongTrigger = await ws.api.POST('/automations', {
      body: {
        name: 'x',
        trigger: { event: 'thread.created' },
        conditions: { all: [{ field: 'message.replyId', operator: 'equals', value: 'a' }] },
        actions: [{ type: 'unassign' }],
      },
    });
    const wrongOperator = await ws.api.POST('/automations', {
      body: {
        name: 'x',
        trigger: { event: 'message.received' },
        conditions: { all: [{ field: 'message.replyId', operator: 'gt', value: 1 }] },
        actions: [{ type: 'unassign' }],
      },
    });
    expect(wrongTrigger.response.status).toBe(400);
    expect(wrongOperator.response.status).toBe(400);
  });
});

describe('reactions are annotations of the message', () => {
  it('when the customer reacts and then removes it, then the message gains and loses their reaction with message.updated, and no message is added', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const ours = await waitForSent(pair.ws, await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'Chegou?' }));
    const before = (await threadMessages(pair.ws, ours.threadId)).length;

    await whatsappMessage(pair, { type: 'reaction', reaction: { message_id: ours.externalId, emoji: '❤️' } });
    const reacted = await byExternalId(pair.ws, ours.externalId!);
    // Meta retries a delivery: the same reaction changes nothing and records nothing.
    await whatsappMessage(pair, { type: 'reaction', reaction: { message_id: ours.externalId, emoji: '❤️' } });
    await whatsappMessage(pair, { type: 'reaction', reaction: { message_id: ours.externalId } });

    expect(reacted!.reactions).toEqual([{ emoji: '❤️', direction: 'inbound', createdAt: expect.any(String) }]);
    expect((await byExternalId(pair.ws, ours.externalId!))!.reactions).toEqual([]);
    expect(await threadMessages(pair.ws, ours.threadId)).toHaveLength(before);
    const updates = (await messageEvents(pair.ws, 'message.updated')).filter((m) => m.id === ours.id && m.status === 'sent');
    expect(updates.map((m) => m.reactions.map((r) => r.emoji))).toEqual([[], ['❤️'], []]);
  });

  it('when Meta delivers a reaction again after a newer one, then the repeat is not applied again', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const ours = await waitForSent(pair.ws, await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'Chegou?' }));
    const smile = { type: 'reaction', reaction: { message_id: ours.externalId, emoji: '😀' } };

    const first = await whatsappMessage(pair, smile);
    await whatsappMessage(pair, { type: 'reaction', reaction: { message_id: ours.externalId } });
    await whatsappMessage(pair, smile, first);

    expect((await byExternalId(pair.ws, ours.externalId!))!.reactions).toEqual([]);
    const updates = (await messageEvents(pair.ws, 'message.updated')).filter((m) => m.id === ours.id && m.status === 'sent');
    expect(updates.map((m) => m.reactions.map((r) => r.emoji))).toEqual([[], ['😀'], []]);
  });

  it('when we react and then remove it, then the answer is 202 with the message, Graph gets type reaction on its wamid, and "" removes it', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);

    const reacted = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👍' } });
    await waitFor('the reaction sent', async () => graph.to(pair.meta.externalId).length === 1);
    const removed = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '' } });
    await waitFor('the removal sent', async () => graph.to(pair.meta.externalId).length === 2);

    expect(reacted.response.status).toBe(202);
    expect(reacted.data).toMatchObject({ id: question.id, status: 'delivered', reactions: [{ emoji: '👍', direction: 'outbound' }] });
    expect(removed.data!.reactions).toEqual([]);
    expect(graph.to(pair.meta.externalId).map((r) => r.body)).toEqual([
      {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: pair.phone.slice(1),
        type: 'reaction',
        reaction: { message_id: question.externalId, emoji: '👍' },
      },
      {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: pair.phone.slice(1),
        type: 'reaction',
        reaction: { message_id: question.externalId, emoji: '' },
      },
    ]);
    // The message is annotated, never moved: it stays the customer's delivered message.
    expect(await byExternalId(pair.ws, question.externalId!)).toMatchObject({ status: 'delivered', error: null, reactions: [] });
  });

  it('when our reaction would change nothing ("" on none, the same emoji again), then it answers 202 and records and sends nothing', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    const updates = async () => {
      const { data } = await pair.ws.api.GET('/events', { params: { query: { type: 'message.updated', limit: 100 } } });
      return data!.data.length;
    };
    const before = await updates();

    const none = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '' } });
    const first = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👍' } });
    const again = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👍' } });
    await waitFor('the reaction sent', async () => graph.to(pair.meta.externalId).length === 1);

    expect([none.response.status, first.response.status, again.response.status]).toEqual([202, 202, 202]);
    expect(none.data!.reactions).toEqual([]);
    expect(again.data!.reactions).toEqual(first.data!.reactions);
    expect(await updates()).toBe(before + 1);
    // The one send, settled: nothing else follows it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(graph.to(pair.meta.externalId).map((r) => (r.body as { reaction: unknown }).reaction)).toEqual([{ message_id: question.externalId, emoji: '👍' }]);
  });

  it('when Meta refuses our reaction for good, then it is taken off the message again, with message.updated by the system', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    graph.answer((r) => (r.externalId === pair.meta.externalId ? graphError(131009, 'Parameter value is not valid', 400) : undefined));
    try {
      const reacted = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '🔥' } });
      expect(reacted.data!.reactions).toMatchObject([{ emoji: '🔥', direction: 'outbound' }]);

      await waitFor('the reaction withdrawn', async () => (await byExternalId(pair.ws, question.externalId!))?.reactions.length === 0);
    } finally {
      graph.answer(undefined);
    }
    const { data } = await pair.ws.api.GET('/events', { params: { query: { type: 'message.updated', limit: 2 } } });
    expect(data!.data[0]!.data).toMatchObject({ object: { id: question.id, reactions: [] }, actor: { type: 'system', id: null } });
  });

  it('when the same reaction is posted twice with an Idempotency-Key, then the second is replayed and Graph gets one request', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    const key = `react-${randomUUID()}`;
    const post = () =>
      request(server, 'POST', `/v1/messages/${question.id}/reactions`, {
        headers: { authorization: `Bearer ${pair.ws.apiKey}`, 'idempotency-key': key },
        body: { emoji: '🙏' },
      });

    const first = await post();
    const second = await post();
    await waitFor('the reaction sent', async () => graph.to(pair.meta.externalId).length === 1);
    await new Promise((resolve) => setTimeout(resolve, 400));

    expect([first.status, second.status]).toEqual([202, 202]);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(graph.to(pair.meta.externalId)).toHaveLength(1);
  });
});

describe('read and typing', () => {
  it('when a person marks the thread read with typing, then Graph gets status read on the latest inbound wamid with the typing indicator', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair, 'primeira');
    const latest = await whatsappInbound(pair, 'segunda');

    const res = await pair.ws.api.POST('/threads/{id}/read', { params: { path: { id: latest.threadId } }, body: { typing: true } });
    await waitFor('the read receipt', async () => graph.to(pair.meta.externalId).length === 1);
    const plain = await pair.ws.api.POST('/threads/{id}/read', { params: { path: { id: latest.threadId } }, body: {} });
    await waitFor('the second read receipt', async () => graph.to(pair.meta.externalId).length === 2);
    // Every field of the body is optional, and so is the body: none at all reads as {}.
    const bodiless = await request(server, 'POST', `/v1/threads/${latest.threadId}/read`, { apiKey: pair.ws.apiKey });
    await waitFor('the third read receipt', async () => graph.to(pair.meta.externalId).length === 3);
    // Declared JSON and empty (as clients that declare JSON on every request send it): no body, {} too.
    const empty = await request(server, 'POST', `/v1/threads/${latest.threadId}/read`, {
      apiKey: pair.ws.apiKey,
      headers: { 'content-type': 'application/json' },
      rawBody: '',
    });
    expect(empty.status).toBe(202);
    await waitFor('the fourth read receipt', async () => graph.to(pair.meta.externalId).length === 4);

    expect(res.response.status).toBe(202);
    expect(res.data!.id).toBe(latest.threadId);
    expect(plain.response.status).toBe(202);
    expect([bodiless.status, bodiless.body.id]).toEqual([202, latest.threadId]);
    expect(graph.to(pair.meta.externalId).map((r) => r.body)).toEqual([
      { messaging_product: 'whatsapp', status: 'read', message_id: latest.externalId, typing_indicator: { type: 'text' } },
      { messaging_product: 'whatsapp', status: 'read', message_id: latest.externalId },
      { messaging_product: 'whatsapp', status: 'read', message_id: latest.externalId },
      { messaging_product: 'whatsapp', status: 'read', message_id: latest.externalId },
    ]);
  });

  it('when a text, a reaction and a read are queued while Graph fails, then they reach Graph in the order they were made', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    let failures = 2;
    graph.answer((r) => (r.externalId === pair.meta.externalId && failures-- > 0 ? graphError(131000, 'Something went wrong', 500) : undefined));
    try {
      const text = await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'Vou verificar.', replyTo: question.id });
      await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👀' } });
      await pair.ws.api.POST('/threads/{id}/read', { params: { path: { id: question.threadId } }, body: { typing: true } });
      await waitFor(
        'all three sent',
        async () => graph.to(pair.meta.externalId).filter((r) => r.answer && 'status' in r.answer && r.answer.status === 200).length === 3,
      );
      await waitForSent(pair.ws, text);
    } finally {
      graph.answer(undefined);
    }

    const kinds = graph.to(pair.meta.externalId).map((r) => r.body.type ?? r.body.status);
    expect(kinds).toEqual(['text', 'text', 'text', 'reaction', 'read']);
    expect(graph.to(pair.meta.externalId)[2]!.body.context).toEqual({ message_id: question.externalId });
  });

  it('when an AI agent takes a message, then the customer sees it read and the agent typing before its answer', async () => {
    const pair = await whatsappPair();
    const model = `gpt-conv-${randomUUID()}`;
    const { data: agent } = await pair.ws.api.POST('/agents', { body: buildAgent({ model }) });
    await pair.ws.api.PATCH('/channels/{id}', { params: { path: { id: pair.meta.channel.id } }, body: { defaultAgentId: agent!.id } });
    ai.answerFor(model, textAnswer('Claro! Já verifico o seu pedido.', 300));

    const question = await whatsappInbound(pair, 'Cadê meu pedido?');
    await waitFor('the answer sent', async () => graph.to(pair.meta.externalId).some((r) => r.body.type === 'text'));

    const bodies = graph.to(pair.meta.externalId).map((r) => r.body);
    expect(bodies[0]).toEqual({ messaging_product: 'whatsapp', status: 'read', message_id: question.externalId, typing_indicator: { type: 'text' } });
    expect(bodies[1]).toMatchObject({ type: 'text', text: { body: 'Claro! Já verifico o seu pedido.' } });
  });
});

describe('Instagram', () => {
  async function instagramPair(): Promise<{ ws: TestWorkspace; meta: MetaChannel; customer: string; first: Message }> {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'instagram');
    const customer = `17841${Math.floor(Math.random() * 1e10)}`;
    const { event, mid } = instagramText(meta.externalId, customer, 'Oi! Vocês entregam em Campinas?');
    const res = await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [event]), { appSecret: meta.appSecret });
    expect(res.status).toBe(200);
    return { ws, meta, customer, first: (await byExternalId(ws, mid))! };
  }

  it('when buttons answer a message, then they go as quick replies with reply_to, and a tap comes back as interactive.reply quoting it', async () => {
    const { ws, meta, customer, first } = await instagramPair();

    const menu = await waitForSent(ws, await send(ws, { contactId: first.contactId, channelId: meta.channel.id, interactive: MENU, replyTo: first.id }));
    const tap = instagramQuickReply(meta.externalId, customer, 'Falar com atendente', 'falar_atendente');
    (tap.event as { message: Record<string, unknown> }).message.reply_to = { mid: menu.externalId };
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [tap.event]), { appSecret: meta.appSecret });

    expect(graph.to(meta.externalId)[0]!.body).toEqual({
      recipient: { id: customer },
      messaging_type: 'RESPONSE',
      reply_to: { mid: first.externalId },
      message: {
        text: 'Como podemos ajudar?',
        quick_replies: [
          { content_type: 'text', title: '2ª via do boleto', payload: 'segunda_via' },
          { content_type: 'text', title: 'Falar com atendente', payload: 'falar_atendente' },
        ],
      },
    });
    expect(await byExternalId(ws, tap.mid)).toMatchObject({
      content: 'Falar com atendente',
      interactive: { reply: { id: 'falar_atendente', title: 'Falar com atendente' } },
      replyTo: menu.id,
    });
  });

  it('when a person marks read with typing, then Graph gets mark_seen then typing_on, each alone', async () => {
    const { ws, meta, customer, first } = await instagramPair();

    const res = await ws.api.POST('/threads/{id}/read', { params: { path: { id: first.threadId } }, body: { typing: true } });
    await waitFor('both sender actions', async () => graph.to(meta.externalId).length === 2);

    expect(res.response.status).toBe(202);
    expect(graph.to(meta.externalId).map((r) => r.body)).toEqual([
      { recipient: { id: customer }, sender_action: 'mark_seen' },
      { recipient: { id: customer }, sender_action: 'typing_on' },
    ]);
  });

  it('when the customer reacts, then their reaction annotates the message; when they unreact, it is gone', async () => {
    const { ws, meta, customer, first } = await instagramPair();
    const ours = await waitForSent(ws, await send(ws, { contactId: first.contactId, channelId: meta.channel.id, content: 'Entregamos sim!' }));
    const reaction = (action: 'react' | 'unreact') => ({
      sender: { id: customer },
      recipient: { id: meta.externalId },
      timestamp: Date.now(),
      reaction: { mid: ours.externalId, action, ...(action === 'react' && { reaction: 'love', emoji: '❤️' }) },
    });

    const react = reaction('react');
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [react]), { appSecret: meta.appSecret });
    const reacted = await byExternalId(ws, ours.externalId!);
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [reaction('unreact')]), { appSecret: meta.appSecret });
    // Meta delivers the reaction again after the unreact: the same time and action, applied once.
    await postWebhook(server, meta.channel.id, instagramDelivery(meta.externalId, [react]), { appSecret: meta.appSecret });

    expect(reacted!.reactions).toMatchObject([{ emoji: '❤️', direction: 'inbound' }]);
    expect((await byExternalId(ws, ours.externalId!))!.reactions).toEqual([]);
    expect(await threadMessages(ws, ours.threadId)).toHaveLength(2);
  });

  it('when we react or send a list on Instagram, then it is 422 unsupported_on_channel and nothing is queued', async () => {
    const { ws, meta, first } = await instagramPair();
    const jobs = await jobCount(ws.workspaceId);

    const reaction = await ws.api.POST('/messages/{id}/reactions', { params: { path: { id: first.id } }, body: { emoji: '👍' } });
    const list = await ws.api.POST('/messages', { body: { contactId: first.contactId, channelId: meta.channel.id, interactive: LIST } });

    expect(reaction.response.status).toBe(422);
    expect(reaction.error!.error).toMatchObject({ code: 'unsupported_on_channel', details: [{ path: '/path/id' }] });
    expect(list.response.status).toBe(422);
    expect(list.error!.error).toMatchObject({ code: 'unsupported_on_channel', details: [{ path: '/body/interactive/type' }] });
    expect(await jobCount(ws.workspaceId)).toBe(jobs);
    expect(await threadMessages(ws, first.threadId)).toHaveLength(1);
  });
});

describe('bad input: nothing stored, nothing queued', () => {
  const row = (i: number) => ({ id: `r${i}`, title: `Opção ${i}` });
  const button = (i: number) => ({ id: `b${i}`, title: `Botão ${i}` });
  const limits: Array<[string, Record<string, unknown>, string]> = [
    ['four buttons', { ...MENU, buttons: [1, 2, 3, 4].map(button) }, '/body/interactive'],
    ['a button title of 21 characters', { ...MENU, buttons: [{ id: 'a', title: 'x'.repeat(21) }] }, '/body/interactive'],
    ['a button id of 257 characters', { ...MENU, buttons: [{ id: 'x'.repeat(257), title: 'a' }] }, '/body/interactive'],
    ['a button id with a trailing space', { ...MENU, buttons: [{ id: 'a ', title: 'a' }] }, '/body/interactive'],
    ['a body of 1025 characters', { ...MENU, body: 'x'.repeat(1025) }, '/body/interactive'],
    ['a header of 61 characters', { ...MENU, header: 'x'.repeat(61) }, '/body/interactive'],
    ['no buttons', { ...MENU, buttons: [] }, '/body/interactive'],
    ['repeated button ids', { ...MENU, buttons: [button(1), { ...button(2), id: 'b1' }] }, '/body/interactive/buttons/1/id'],
    ['repeated button titles', { ...MENU, buttons: [button(1), { ...button(2), title: 'Botão 1' }] }, '/body/interactive/buttons/1/title'],
    ['eleven sections', { ...LIST, sections: Array.from({ length: 11 }, (_, i) => ({ title: `S${i}`, rows: [row(i)] })) }, '/body/interactive'],
    ['eleven rows in a section', { ...LIST, sections: [{ rows: Array.from({ length: 11 }, (_, i) => row(i)) }] }, '/body/interactive'],
    [
      'eleven rows in all',
      {
        ...LIST,
        sections: [
          { title: 'A', rows: Array.from({ length: 6 }, (_, i) => row(i)) },
          { title: 'B', rows: Array.from({ length: 5 }, (_, i) => row(i + 6)) },
        ],
      },
      '/body/interactive/sections/1/rows/4',
    ],
    ['a row title of 25 characters', { ...LIST, sections: [{ rows: [{ id: 'a', title: 'x'.repeat(25) }] }] }, '/body/interactive'],
    ['a row description of 73 characters', { ...LIST, sections: [{ rows: [{ id: 'a', title: 'a', description: 'x'.repeat(73) }] }] }, '/body/interactive'],
    ['a list button of 21 characters', { ...LIST, button: 'x'.repeat(21) }, '/body/interactive'],
    [
      'repeated row ids',
      {
        ...LIST,
        sections: [
          { title: 'A', rows: [row(1)] },
          { title: 'B', rows: [row(1)] },
        ],
      },
      '/body/interactive/sections/1/rows/0/id',
    ],
    ['two sections, one without a title', { ...LIST, sections: [{ title: 'A', rows: [row(1)] }, { rows: [row(2)] }] }, '/body/interactive/sections/1/title'],
  ];

  it.each(limits)('when the message has %s, then it is a 400 naming the field', async (_, interactive, path) => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const jobs = await jobCount(pair.ws.workspaceId);

    const { response, error } = await pair.ws.api.POST('/messages', {
      body: { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive } as unknown as MessageCreate,
    });

    expect(response.status).toBe(400);
    expect(error!.error.code).toBe('validation_error');
    expect(error!.error.details!.some((d) => d.path.startsWith(path))).toBe(true);
    expect(await jobCount(pair.ws.workspaceId)).toBe(jobs);
  });

  it('when interactive comes with content, or a reaction is not one emoji, then it is a 400', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);

    const both = await pair.ws.api.POST('/messages', {
      body: { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive: MENU, content: 'x' },
    });
    const two = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👍👍' } });
    const word = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: 'ok' } });

    expect(both.response.status).toBe(400);
    expect([two.response.status, word.response.status]).toEqual([400, 400]);
    expect(two.error!.error.details).toEqual([{ path: '/body/emoji', message: expect.any(String) }]);
    expect(graph.to(pair.meta.externalId)).toEqual([]);
  });

  it('when replyTo is another contact, not sent yet, unknown or another workspace, then it is 422 invalid_reply; another workspace reaction is 404', async () => {
    const pair = await whatsappPair();
    await whatsappInbound(pair);
    const other = await whatsappPair(pair.ws);
    const othersMessage = await whatsappInbound(other);
    // A message of the contact that has not reached Meta yet: Graph holds it.
    graph.answer((r) => (r.externalId === pair.meta.externalId && r.body.text?.body === 'lento' ? { status: 200, delayMs: 3_000, body: {} } : undefined));
    const unsent = await send(pair.ws, { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'lento' });
    const elsewhere = await whatsappPair();
    const foreign = await whatsappInbound(elsewhere);
    const jobs = await jobCount(pair.ws.workspaceId);

    const replies = await Promise.all(
      [othersMessage.id, unsent.id, randomUUID(), foreign.id].map((replyTo) =>
        pair.ws.api.POST('/messages', { body: { contactId: pair.contactId, channelId: pair.meta.channel.id, content: 'Resposta', replyTo } }),
      ),
    );
    const foreignReaction = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: foreign.id } }, body: { emoji: '👍' } });
    const unsentReaction = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: unsent.id } }, body: { emoji: '👍' } });
    graph.answer(undefined);

    for (const reply of replies) {
      expect(reply.response.status).toBe(422);
      expect(reply.error!.error).toMatchObject({ code: 'invalid_reply', details: [{ path: '/body/replyTo' }] });
    }
    expect(foreignReaction.response.status).toBe(404);
    expect(unsentReaction.response.status).toBe(422);
    expect(unsentReaction.error!.error.code).toBe('invalid_reference');
    expect(await jobCount(pair.ws.workspaceId)).toBeLessThanOrEqual(jobs);
  });

  it('when buttons or a reaction go outside the 24-hour window, then it is 422 outside_messaging_window and nothing is queued', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    await server.db
      .updateTable('threads')
      .set({ last_inbound_at: new Date(Date.now() - 25 * 3600_000) })
      .where('id', '=', question.threadId)
      .execute();
    const jobs = await jobCount(pair.ws.workspaceId);

    const buttons = await pair.ws.api.POST('/messages', { body: { contactId: pair.contactId, channelId: pair.meta.channel.id, interactive: MENU } });
    const reaction = await pair.ws.api.POST('/messages/{id}/reactions', { params: { path: { id: question.id } }, body: { emoji: '👍' } });

    expect(buttons.response.status).toBe(422);
    expect(buttons.error!.error).toMatchObject({ code: 'outside_messaging_window', details: [{ path: '/body/interactive' }] });
    expect(reaction.response.status).toBe(422);
    expect(reaction.error!.error.code).toBe('outside_messaging_window');
    expect(await jobCount(pair.ws.workspaceId)).toBe(jobs);
    expect((await byExternalId(pair.ws, question.externalId!))!.reactions).toEqual([]);
  });

  it('when a thread of another workspace is marked read, then it is 404', async () => {
    const pair = await whatsappPair();
    const question = await whatsappInbound(pair);
    const stranger = await createWorkspace(server);

    const res = await stranger.api.POST('/threads/{id}/read', { params: { path: { id: question.threadId } }, body: {} });

    expect(res.response.status).toBe(404);
  });
});

describe('the Graph double refuses what Meta refuses', () => {
  const to = '5511987654321';
  it('when bodies are Meta documented shapes, then they pass; when they break a documented rule, then they are refused', () => {
    const ok = [
      { messaging_product: 'whatsapp', recipient_type: 'individual', to, type: 'text', text: { body: 'oi' }, context: { message_id: 'wamid.A' } },
      { messaging_product: 'whatsapp', recipient_type: 'individual', to, type: 'reaction', reaction: { message_id: 'wamid.A', emoji: '😀' } },
      { messaging_product: 'whatsapp', status: 'read', message_id: 'wamid.A', typing_indicator: { type: 'text' } },
      { recipient: { id: '1784' }, sender_action: 'typing_on' },
      { recipient: { id: '1784' }, reply_to: { mid: 'm.A' }, message: { text: 'oi' } },
    ];
    const refused = [
      {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to,
        type: 'reaction',
        reaction: { message_id: 'wamid.A', emoji: '😀' },
        context: { message_id: 'wamid.B' },
      },
      { messaging_product: 'whatsapp', recipient_type: 'individual', to, type: 'reaction', reaction: { message_id: 'wamid.A', emoji: '😀😀' } },
      { messaging_product: 'whatsapp', status: 'read', message_id: 'wamid.A', typing_indicator: { type: 'audio' } },
      { messaging_product: 'whatsapp', status: 'read', message_id: 'wamid.A', to },
      {
        messaging_product: 'whatsapp',
        to,
        type: 'interactive',
        interactive: {
          type: 'button',
          body: { text: 'x' },
          action: { buttons: [1, 2, 3, 4].map((i) => ({ type: 'reply', reply: { id: `${i}`, title: `${i}` } })) },
        },
      },
      { recipient: { id: '1784' }, sender_action: 'mark_seen', message: { text: 'oi' } },
      {
        recipient: { id: '1784' },
        message: { text: 'oi', quick_replies: Array.from({ length: 14 }, (_, i) => ({ content_type: 'text', title: `${i}`, payload: `${i}` })) },
      },
    ];
    expect(ok.map(graphBodyProblem)).toEqual(ok.map(() => undefined));
    expect(refused.map(graphBodyProblem).every((problem) => typeof problem === 'string')).toBe(true);
  });
});
