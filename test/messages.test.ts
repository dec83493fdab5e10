// Messages: sending (append to the pair's open thread or open one, also under concurrency) and a
// thread's messages in chronological order.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function createContact(ws: TestWorkspace): Promise<string> {
  const { data } = await ws.api.POST('/contacts', { body: buildContact() });
  return data!.id;
}

async function sendMessage(ws: TestWorkspace, body: components['schemas']['MessageCreate']): Promise<Message> {
  const { data, response } = await ws.api.POST('/messages', { body });
  expect(response.status).toBe(201);
  return data!;
}

const storedThreads = (workspaceId: string) =>
  server.db.selectFrom('threads').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();

const storedMessages = (workspaceId: string) =>
  server.db.selectFrom('messages').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();

describe('POST /messages', () => {
  it('when the pair has no thread, then it answers 201 with a queued outbound message in a newly opened thread', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const body = { contactId, channelId, content: 'Olá, Mariana! Seu pedido 4521 saiu para entrega.' };

    const { data, response } = await ws.api.POST('/messages', { body });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      threadId: expect.stringMatching(UUID),
      contactId,
      channelId,
      direction: 'outbound',
      content: body.content,
      status: 'queued',
      externalId: null,
      error: null,
      template: null,
      agentId: null,
      attachments: [],
      replyTo: null,
      reactions: [],
      interactive: null,
      createdAt: expect.stringMatching(ISO_MS),
    });
    const { data: threadsOfContact } = await ws.api.GET('/threads', { params: { query: { contactId } } });
    expect(threadsOfContact).toEqual({
      data: [
        {
          id: data!.threadId,
          contactId,
          channelId,
          agentId: null,
          stageId: (await ws.api.GET('/stages')).data!.data[0]!.id,
          status: 'open',
          closedAt: null,
          npsScore: null,
          npsCreatedAt: null,
          npsRequestedAt: null,
          lastMessageAt: data!.createdAt,
          lastInboundAt: null,
          labels: [],
          sla: null,
          createdAt: expect.stringMatching(ISO_MS),
          updatedAt: expect.stringMatching(ISO_MS),
        },
      ],
      pagination: { total: 1, page: 1, limit: 20 },
    });
    const threads = await storedThreads(ws.workspaceId);
    expect(threads).toHaveLength(1);
    expect(threads[0]).toMatchObject({ id: data!.threadId, contact_id: contactId, channel_id: channelId, status: 'open' });
    expect(threads[0]!.last_message_at?.toISOString()).toBe(data!.createdAt);
    expect(await storedMessages(ws.workspaceId)).toEqual([
      {
        workspace_id: ws.workspaceId,
        id: data!.id,
        thread_id: data!.threadId,
        contact_id: contactId,
        channel_id: channelId,
        direction: 'outbound',
        content: body.content,
        status: 'queued',
        external_id: null,
        error: null,
        template: null,
        agent_id: null,
        automation_id: null,
        attachments: [],
        reply_to: null,
        reactions: [],
        reaction_ids: [],
        interactive: null,
        quick_replies: null,
        created_at: new Date(data!.createdAt),
      },
    ]);
  });

  it('when the pair already has an open thread, then the message is appended to it and moves its lastMessageAt', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const { data: opened } = await ws.api.POST('/threads', { body: { contactId, channelId } });

    const { data, response } = await ws.api.POST('/messages', { body: { contactId, channelId, content: 'Primeira mensagem' } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      threadId: opened!.id,
      contactId,
      channelId,
      direction: 'outbound',
      content: 'Primeira mensagem',
      status: 'queued',
      externalId: null,
      error: null,
      template: null,
      agentId: null,
      attachments: [],
      replyTo: null,
      reactions: [],
      interactive: null,
      createdAt: expect.stringMatching(ISO_MS),
    });
    const { data: threadsOfContact } = await ws.api.GET('/threads', { params: { query: { contactId } } });
    expect(threadsOfContact).toEqual({
      data: [{ ...opened, lastMessageAt: data!.createdAt, updatedAt: expect.stringMatching(ISO_MS) }],
      pagination: { total: 1, page: 1, limit: 20 },
    });
    const threads = await storedThreads(ws.workspaceId);
    expect(threads.map((t) => t.id)).toEqual([opened!.id]);
    expect(threads[0]!.last_message_at?.toISOString()).toBe(data!.createdAt);
    const messages = await storedMessages(ws.workspaceId);
    expect(messages.map((m) => [m.id, m.thread_id])).toEqual([[data!.id, opened!.id]]);
  });

  it('when a message opened the thread, then the next message of the pair goes into the same thread', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[1]!.id;
    const first = await sendMessage(ws, { contactId, channelId, content: 'Um' });

    const second = await sendMessage(ws, { contactId, channelId, content: 'Dois' });

    expect(second).toEqual({ ...first, id: expect.stringMatching(UUID), content: 'Dois', createdAt: expect.stringMatching(ISO_MS) });
    expect(second.id).not.toBe(first.id);
    const threads = await storedThreads(ws.workspaceId);
    expect(threads).toHaveLength(1);
    expect(threads[0]!.last_message_at?.toISOString()).toBe(second.createdAt);
    expect((await storedMessages(ws.workspaceId)).map((m) => [m.id, m.thread_id, m.content])).toEqual([
      [first.id, first.threadId, 'Um'],
      [second.id, first.threadId, 'Dois'],
    ]);
  });

  it('when the pair only has a closed thread, then a new open thread is opened for the message', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const first = await sendMessage(ws, { contactId, channelId, content: 'Antes' });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: first.threadId } }, body: { status: 'closed' } });

    const second = await sendMessage(ws, { contactId, channelId, content: 'Depois' });

    expect(second.threadId).toEqual(expect.stringMatching(UUID));
    expect(second.threadId).not.toBe(first.threadId);
    const threads = await storedThreads(ws.workspaceId);
    expect(threads.map((t) => [t.id, t.status])).toEqual([
      [first.threadId, 'closed'],
      [second.threadId, 'open'],
    ]);
    expect(threads[1]!.last_message_at?.toISOString()).toBe(second.createdAt);
  });

  it('when the same contact writes on another channel, then that message gets a thread of its own', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const onWhatsapp = await sendMessage(ws, { contactId, channelId: ws.channels[0]!.id, content: 'WhatsApp' });

    const onInstagram = await sendMessage(ws, { contactId, channelId: ws.channels[1]!.id, content: 'Instagram' });

    expect(onInstagram.threadId).not.toBe(onWhatsapp.threadId);
    const threads = await storedThreads(ws.workspaceId);
    expect(threads.map((t) => [t.id, t.channel_id, t.status]).sort()).toEqual(
      [
        [onWhatsapp.threadId, ws.channels[0]!.id, 'open'],
        [onInstagram.threadId, ws.channels[1]!.id, 'open'],
      ].sort(),
    );
  });

  it('when the content has 4096 characters, then it is accepted and stored whole', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const content = 'á'.repeat(4096);

    const message = await sendMessage(ws, { contactId, channelId: ws.channels[0]!.id, content });

    expect(message.content).toBe(content);
    expect((await storedMessages(ws.workspaceId))[0]!.content).toBe(content);
  });

  it.each([
    ['empty', ''],
    ['4097 characters long', 'a'.repeat(4097)],
  ])('when the content is %s, then it answers 400 validation_error and stores nothing', async (_, content) => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);

    const res = await request(server, 'POST', '/v1/messages', {
      apiKey: ws.apiKey,
      body: { contactId, channelId: ws.channels[0]!.id, content },
    });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/content', message: expect.any(String) }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([]);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });

  it('when the contactId is unknown, then it answers 422 invalid_reference on /body/contactId and stores nothing', async () => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.POST('/messages', {
      body: { contactId: randomUUID(), channelId: ws.channels[0]!.id, content: 'Olá' },
    });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'invalid_reference',
        message: 'The contact does not exist.',
        details: [{ path: '/body/contactId', message: 'no contact with this id' }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([]);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });

  it('when the channelId is unknown, then it answers 422 invalid_reference on /body/channelId and stores nothing', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);

    const { error, response } = await ws.api.POST('/messages', { body: { contactId, channelId: randomUUID(), content: 'Olá' } });

    expect(response.status).toBe(422);
    expect(error).toEqual({
      error: {
        code: 'invalid_reference',
        message: 'The channel does not exist.',
        details: [{ path: '/body/channelId', message: 'no channel with this id' }],
        requestId: expect.any(String),
      },
    });
    expect(await storedThreads(ws.workspaceId)).toEqual([]);
    expect(await storedMessages(ws.workspaceId)).toEqual([]);
  });

  it('when 20 messages for a new pair are sent at once, then exactly one thread is opened and all 20 land in it', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const contents = Array.from({ length: 20 }, (_, i) => `Mensagem ${i + 1}`);

    const responses = await Promise.all(contents.map((content) => ws.api.POST('/messages', { body: { contactId, channelId, content } })));

    expect(responses.map((r) => r.response.status)).toEqual(contents.map(() => 201));
    const sent = responses.map((r) => r.data!);
    const threadId = sent[0]!.threadId;
    expect(sent).toEqual(
      contents.map((content) => ({
        id: expect.stringMatching(UUID),
        threadId,
        contactId,
        channelId,
        direction: 'outbound',
        content,
        status: 'queued',
        externalId: null,
        error: null,
        template: null,
        agentId: null,
        attachments: [],
        replyTo: null,
        reactions: [],
        interactive: null,
        createdAt: expect.stringMatching(ISO_MS),
      })),
    );
    const threads = await storedThreads(ws.workspaceId);
    expect(threads.map((t) => [t.id, t.status])).toEqual([[threadId, 'open']]);
    const latest = sent
      .map((m) => m.createdAt)
      .sort()
      .at(-1);
    expect(threads[0]!.last_message_at?.toISOString()).toBe(latest);
    const messages = await storedMessages(ws.workspaceId);
    expect(messages).toHaveLength(20);
    expect(new Set(messages.map((m) => m.thread_id))).toEqual(new Set([threadId]));
    expect(messages.map((m) => m.content).sort()).toEqual([...contents].sort());
    const { data: listed } = await ws.api.GET('/threads', { params: { query: { contactId, channelId } } });
    expect(listed!.data.map((t) => [t.id, t.status, t.lastMessageAt])).toEqual([[threadId, 'open', latest]]);
  });
});

describe('GET /threads/{threadId}/messages', () => {
  async function threadWithMessages(count: number): Promise<{ ws: TestWorkspace; threadId: string; sent: Message[] }> {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const channelId = ws.channels[0]!.id;
    const sent: Message[] = [];
    for (let i = 1; i <= count; i++) sent.push(await sendMessage(ws, { contactId, channelId, content: `Mensagem ${i}` }));
    return { ws, threadId: sent[0]!.threadId, sent };
  }

  it('when the thread has messages, then it lists them oldest first with the default page', async () => {
    const { ws, threadId, sent } = await threadWithMessages(3);

    const { data, response } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: sent, pagination: { total: 3, page: 1, limit: 20 } });
  });

  it('when messages were created out of id order, then they list by createdAt and then by id', async () => {
    const { ws, threadId, sent } = await threadWithMessages(3);
    const [m1, m2, m3] = sent as [Message, Message, Message];
    // created_at is insert-only for the application; the test moves it to arrange the order.
    const setCreatedAt = (id: string, at: string) =>
      sql`update messages set created_at = ${at}::timestamptz where workspace_id = ${ws.workspaceId} and id = ${id}`.execute(server.db);
    await setCreatedAt(m1.id, '2026-05-02T10:00:00.000Z');
    await setCreatedAt(m2.id, '2026-05-01T10:00:00.000Z');
    await setCreatedAt(m3.id, '2026-05-01T10:00:00.000Z');

    const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });

    expect(data).toEqual({
      data: [
        { ...m2, createdAt: '2026-05-01T10:00:00.000Z' },
        { ...m3, createdAt: '2026-05-01T10:00:00.000Z' },
        { ...m1, createdAt: '2026-05-02T10:00:00.000Z' },
      ],
      pagination: { total: 3, page: 1, limit: 20 },
    });
  });

  it('when pages of one are asked for, then each page holds the next message and the exact total', async () => {
    const { ws, threadId, sent } = await threadWithMessages(3);

    const pages = [];
    for (const page of [1, 2, 3]) {
      const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { page, limit: 1 } } });
      pages.push(data);
    }

    expect(pages).toEqual([
      { data: [sent[0]], pagination: { total: 3, page: 1, limit: 1 } },
      { data: [sent[1]], pagination: { total: 3, page: 2, limit: 1 } },
      { data: [sent[2]], pagination: { total: 3, page: 3, limit: 1 } },
    ]);
  });

  it('when the page is past the last one, then data is empty and the total is still exact', async () => {
    const { ws, threadId } = await threadWithMessages(3);

    const { data, response } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { page: 3, limit: 2 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 3, page: 3, limit: 2 } });
  });

  it('when the limit is 100, then one page holds every message', async () => {
    const { ws, threadId, sent } = await threadWithMessages(3);

    const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });

    expect(data).toEqual({ data: sent, pagination: { total: 3, page: 1, limit: 100 } });
  });

  it('when the thread has no messages yet, then it answers 200 with an empty page', async () => {
    const ws = await createWorkspace(server);
    const contactId = await createContact(ws);
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId, channelId: ws.channels[0]!.id } });

    const { data, response } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: thread!.id }, query: { page: 2 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 0, page: 2, limit: 20 } });
  });

  it('when the thread is unknown, then it answers 404 not_found', async () => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: randomUUID() } } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { code: 'not_found', message: 'Thread not found.', requestId: expect.any(String) } });
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['page=0', 'page'],
  ])('when the query has %s, then it answers 400 validation_error', async (query, field) => {
    const { ws, threadId } = await threadWithMessages(1);

    const res = await request(server, 'GET', `/v1/threads/${threadId}/messages?${query}`, { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: `/query/${field}`, message: expect.any(String) }],
        requestId: expect.any(String),
      },
    });
  });
});
