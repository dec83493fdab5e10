// AI agents answering customers through the durable queue: the Chat Completions request's shape,
// the answer sent as the agent's message through the channel, the handoff to a person by round robin
// (history, actor the agent; to null when nobody is online), one answer to a burst, the AI down, a deactivated agent, no AI configured, and
// a context that never holds another thread's messages. The only double is the AI provider, a local
// HTTP server speaking the Chat Completions wire format.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { components } from '../generated/api.js';
import { chatRequest, readChatAnswer } from '../src/ai/chat.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { buildAgent, buildHuman, buildPhone, createWorkspace, UUID, type TestWorkspace } from './helpers/api.js';
import { AiDouble, errorAnswer, textAnswer, toolCallAnswer } from './helpers/ai.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { GraphDouble, whatsappDelivery } from './helpers/graph.js';
import { waitFor as waitUntil } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Message = components['schemas']['Message'];
type Entry = components['schemas']['ThreadHistoryEntry'];

const API_KEY = 'sk-test-0123456789abcdef';
/**
 * How long an agent waits for a burst to end before answering, in these tests: longer than any test,
 * so no reply runs by itself while a test is still acting (a burst, a close, a deactivation), however
 * busy the machine. A test's waits let them run (`waitFor` below).
 */
const REPLY_DELAY_MS = 60_000;
const MAX_ATTEMPTS = 3;

const HANDOFF_TOOL = {
  type: 'function',
  function: {
    name: 'handoff_to_human',
    description: expect.any(String),
    parameters: { type: 'object', properties: { reason: { type: 'string', description: expect.any(String) } }, required: ['reason'] },
  },
};

describe('the Chat Completions request and answer (pure)', () => {
  it('when the AI settings are read, then unset means off, the defaults are those documented, and a call may outlast the lease (it is renewed)', () => {
    const off = loadConfig({});
    expect([off.aiBaseUrl, off.aiApiKey, off.aiTimeoutMs, off.aiReplyDelayMs, off.aiConcurrency]).toEqual([undefined, undefined, 30_000, 50, 16]);
    const on = loadConfig({ AI_BASE_URL: 'http://localhost:11434/v1/', AI_API_KEY: 'ollama' });
    expect([on.aiBaseUrl, on.aiApiKey]).toEqual(['http://localhost:11434/v1', 'ollama']);
    expect(() => loadConfig({ AI_BASE_URL: 'localhost:11434' })).toThrow(ConfigError);
    // The worker renews a running job's lease, so the lease need not outlast an AI call.
    expect(loadConfig({ AI_BASE_URL: 'http://localhost:11434/v1', AI_TIMEOUT_MS: '60000' })).toMatchObject({ aiTimeoutMs: 60_000, jobLeaseMs: 6_000 });
  });

  it('when the thread has erased messages, then they are left out and the rest keep their roles in order', () => {
    const request = chatRequest({ model: 'gpt-4o-mini', instructions: 'Seja breve.' }, [
      { direction: 'inbound', content: null },
      { direction: 'outbound', content: 'Olá!' },
      { direction: 'inbound', content: 'Meu pedido?' },
    ]);

    expect(request).toEqual({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'Seja breve.' },
        { role: 'assistant', content: 'Olá!' },
        { role: 'user', content: 'Meu pedido?' },
      ],
      tools: [HANDOFF_TOOL],
    });
  });

  it('when the thread has files, then the AI is told each one by type and media id with its caption, never its bytes', () => {
    const request = chatRequest({ model: 'gpt-4o-mini', instructions: 'Seja breve.' }, [
      { direction: 'inbound', content: 'Olha a nota', attachments: [{ id: '01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6b', type: 'image', caption: 'Olha a nota' }] },
      { direction: 'inbound', content: null, attachments: [{ id: '01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6c', type: 'audio', caption: null }] },
      { direction: 'outbound', content: null, attachments: [{ id: '01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6d', type: 'document', caption: null }] },
    ]);

    expect(request).toMatchObject({
      messages: [
        { role: 'system', content: 'Seja breve.' },
        { role: 'user', content: '[image 01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6b] Olha a nota' },
        { role: 'user', content: '[audio 01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6c]' },
        { role: 'assistant', content: '[document 01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6d]' },
      ],
    });
  });

  it('when the answer calls handoff_to_human with broken arguments, then it is still a handoff', () => {
    const answer = readChatAnswer({
      choices: [{ message: { content: null, tool_calls: [{ type: 'function', function: { name: 'handoff_to_human', arguments: '{"reas' } }] } }],
    });

    expect(answer).toEqual({ kind: 'handoff', reason: 'handoff_requested' });
  });

  it('when the answer has neither text nor a handoff, then it is a passing failure', () => {
    expect(readChatAnswer({ choices: [{ message: { content: '   ' } }] })).toMatchObject({ kind: 'failed', transient: true });
    expect(readChatAnswer({ error: 'x' })).toMatchObject({ kind: 'failed', transient: true });
  });
});

describe.skipIf(!databaseUrl)('AI agents (needs DATABASE_URL)', () => {
  let ai: AiDouble;
  let graph: GraphDouble;
  let server: TestServer;
  let own: OwnDatabase | undefined;
  beforeAll(async () => {
    ai = await AiDouble.start();
    graph = await GraphDouble.start();
    // Its workers take every job of their database: one of their own.
    own = await ownDatabase();
    server = await startServer({
      databaseUrl: own.url,
      jobs: true,
      config: {
        metaGraphUrl: graph.url,
        aiBaseUrl: ai.url,
        aiApiKey: API_KEY,
        aiTimeoutMs: 1_000,
        aiReplyDelayMs: REPLY_DELAY_MS,
        retryMaxAttempts: MAX_ATTEMPTS,
        retryBaseMs: 20,
        jobLeaseMs: 5_000,
        jobPollMs: 200,
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await ai?.close();
    await graph?.close();
    await own?.drop();
  });

  interface Setup {
    ws: TestWorkspace;
    channelId: string;
    agentId: string;
    model: string;
    instructions: string;
  }

  /** A workspace whose sandbox WhatsApp channel assigns new threads to an agent with a model of its own. */
  async function withAgent(ws?: TestWorkspace): Promise<Setup> {
    ws ??= await createWorkspace(server);
    const model = `gpt-test-${randomUUID()}`;
    const instructions = 'Você é a Ana, da Loja Exemplo. Responda em português, em no máximo duas frases.';
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent({ model, instructions }) });
    const channelId = ws.channels.find((c) => c.type === 'whatsapp')!.id;
    const { response } = await ws.api.PATCH('/channels/{id}', { params: { path: { id: channelId } }, body: { defaultAgentId: agent!.id } });
    expect(response.status).toBe(200);
    return { ws, channelId, agentId: agent!.id, model, instructions };
  }

  async function inbound(setup: Setup, from: string, content: string): Promise<Message> {
    const { data, response } = await setup.ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: setup.channelId } },
      body: { from, content, name: 'Mariana Silva' },
    });
    expect(response.status).toBe(201);
    return data!;
  }

  async function messagesOf(ws: TestWorkspace, threadId: string): Promise<Message[]> {
    const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });
    return data!.data;
  }

  async function historyOf(ws: TestWorkspace, id: string): Promise<Entry[]> {
    const { data } = await ws.api.GET('/threads/{id}/history', { params: { path: { id }, query: { limit: 100 } } });
    return data!.data;
  }

  /** What an integrator's webhook is told: the event log's objects of one type, oldest first. */
  async function eventObjects(ws: TestWorkspace, type: 'message.created' | 'thread.updated'): Promise<Record<string, unknown>[]> {
    const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
    return data!.data.map((event) => event.data.object as unknown as Record<string, unknown>).reverse();
  }

  const aiJobs = (workspaceId: string) =>
    server.db.selectFrom('jobs').selectAll().where('workspace_id', '=', workspaceId).where('queue', '=', 'ai-reply').execute();

  /** Waits for `check`, each look first making the replies queued so far due now: the burst is over when the test waits. */
  const waitFor = (what: string, check: () => boolean | Promise<boolean>, timeoutMs?: number): Promise<void> =>
    waitUntil(
      what,
      async () => {
        await server.db
          .updateTable('jobs')
          .set({ run_at: sql`now()` })
          .where('queue', '=', 'ai-reply')
          .where('locked_by', 'is', null)
          .where('run_at', '>', sql<Date>`now()`)
          .execute();
        return check();
      },
      timeoutMs,
    );

  it('when a customer writes to a thread of an active agent, then the AI gets the documented request and its answer is sent as the agent', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, textAnswer('Olá, Mariana! Vou verificar o pedido 4521.'));

    const first = await inbound(setup, buildPhone(), 'Oi, meu pedido 4521 não chegou');

    await waitFor('the agent answer delivered', async () =>
      (await messagesOf(setup.ws, first.threadId)).some((m) => m.direction === 'outbound' && m.status === 'delivered'),
    );
    const [request, ...more] = ai.forModel(setup.model);
    expect(more).toEqual([]);
    expect(request).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions',
      authorization: `Bearer ${API_KEY}`,
      contentType: 'application/json',
    });
    expect(request!.body).toEqual({
      model: setup.model,
      messages: [
        { role: 'system', content: setup.instructions },
        { role: 'user', content: 'Oi, meu pedido 4521 não chegou' },
      ],
      tools: [HANDOFF_TOOL],
    });
    const [, answer] = await messagesOf(setup.ws, first.threadId);
    expect(answer).toEqual({
      id: expect.stringMatching(UUID),
      threadId: first.threadId,
      contactId: first.contactId,
      channelId: setup.channelId,
      direction: 'outbound',
      content: 'Olá, Mariana! Vou verificar o pedido 4521.',
      status: 'delivered',
      externalId: `sandbox.${answer!.id}`,
      error: null,
      template: null,
      agentId: setup.agentId,
      attachments: [],
      replyTo: null,
      reactions: [],
      interactive: null,
      createdAt: expect.any(String),
    });
    expect(first.agentId).toBeNull();
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);
    // The integrator learns of the answer as of any message, with the agent that wrote it.
    const created = await eventObjects(setup.ws, 'message.created');
    expect(created.map((m) => [m.id, m.agentId])).toEqual([
      [first.id, null],
      [answer!.id, setup.agentId],
    ]);
  });

  it('when the customer writes again, then the context holds the conversation oldest first, inbound as user and outbound as assistant', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, (request) => textAnswer(`Resposta ${ai.forModel(setup.model).indexOf(request) + 1}`)(request));
    const phone = buildPhone();
    const first = await inbound(setup, phone, 'Oi');
    await waitFor('the first answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 2);
    // An operator's message through the API is the assistant's side too.
    const { response } = await setup.ws.api.POST('/messages', {
      body: { contactId: first.contactId, channelId: setup.channelId, content: 'Aqui é o Pedro, da equipe.' },
    });
    expect(response.status).toBe(201);

    await inbound(setup, phone, 'Quero trocar o tamanho');

    await waitFor('the second answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 5);
    const requests = ai.forModel(setup.model);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.body.messages).toEqual([
      { role: 'system', content: setup.instructions },
      { role: 'user', content: 'Oi' },
      { role: 'assistant', content: 'Resposta 1' },
      { role: 'assistant', content: 'Aqui é o Pedro, da equipe.' },
      { role: 'user', content: 'Quero trocar o tamanho' },
    ]);
    const messages = await messagesOf(setup.ws, first.threadId);
    expect(messages.map((m) => [m.direction, m.content, m.agentId])).toEqual([
      ['inbound', 'Oi', null],
      ['outbound', 'Resposta 1', setup.agentId],
      ['outbound', 'Aqui é o Pedro, da equipe.', null],
      ['inbound', 'Quero trocar o tamanho', null],
      ['outbound', 'Resposta 2', setup.agentId],
    ]);
  });

  it('when the message to answer was created before an answer that did not see it (it committed after), then the AI is told it last', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, (request) => textAnswer(`Resposta ${ai.forModel(setup.model).indexOf(request) + 1}`)(request));
    const phone = buildPhone();
    const first = await inbound(setup, phone, 'Oi');
    await waitFor('the first answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 2);
    const answer = (await messagesOf(setup.ws, first.threadId))[1]!;

    // Two messages of a burst, the second committed after the first's answer: created before that answer.
    const late = await inbound(setup, phone, 'E o prazo de entrega?');
    // (created_at is never updated by the service: the schema's type refuses it, so raw SQL.)
    const before = new Date(Date.parse(answer.createdAt) - 1);
    await sql`update messages set created_at = ${before} where workspace_id = ${setup.ws.workspaceId} and id = ${late.id}`.execute(server.db);

    await waitFor('the second answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 4);
    expect(ai.forModel(setup.model)[1]!.body.messages).toEqual([
      { role: 'system', content: setup.instructions },
      { role: 'user', content: 'Oi' },
      { role: 'assistant', content: 'Resposta 1' },
      { role: 'user', content: 'E o prazo de entrega?' },
    ]);
  });

  it('when the AI calls handoff_to_human and no person is online, then the thread loses its agent with the reason in its history, by the agent, and nothing is sent', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, toolCallAnswer({ reason: 'Cliente pediu para falar com um atendente' }));

    const first = await inbound(setup, buildPhone(), 'Quero falar com uma pessoa');

    let history: Entry[] = [];
    await waitFor('the handoff', async () => (history = await historyOf(setup.ws, first.threadId)).length === 4);
    expect(history.at(-1)).toEqual({
      id: expect.stringMatching(UUID),
      field: 'agentId',
      from: setup.agentId,
      to: null,
      actor: { type: 'agent', id: setup.agentId },
      reason: 'Cliente pediu para falar com um atendente',
      createdAt: expect.any(String),
    });
    const { data: thread } = await setup.ws.api.GET('/threads/{id}', { params: { path: { id: first.threadId } } });
    expect(thread!.agentId).toBeNull();
    expect(await messagesOf(setup.ws, first.threadId)).toEqual([first]);
    // To the integrator, the handoff is a thread.updated event whose thread has no agent.
    expect((await eventObjects(setup.ws, 'thread.updated')).at(-1)).toEqual(thread);
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);

    await inbound(setup, (await contactPhone(setup.ws, first.contactId))!, 'Alô?');
    // A reply is queued in the inbound's own transaction: none queued, none will ever be asked.
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);
    expect(ai.forModel(setup.model)).toHaveLength(1);
  });

  it('when the AI calls handoff_to_human and a person is online, then the thread lands on them in one history entry by the agent, and the AI answers no more', async () => {
    const setup = await withAgent();
    const { data: pedro } = await setup.ws.api.POST('/agents', { body: buildHuman({ name: 'Pedro', capacity: 3 }) });
    await setup.ws.api.POST('/agents', { body: buildHuman({ name: 'Away', availability: 'away' }) });
    ai.answerFor(setup.model, toolCallAnswer({ reason: 'Cliente pediu para falar com um atendente' }));

    const first = await inbound(setup, buildPhone(), 'Quero falar com uma pessoa');

    let history: Entry[] = [];
    await waitFor('the handoff', async () => (history = await historyOf(setup.ws, first.threadId)).length === 4);
    expect(history.at(-1)).toEqual({
      id: expect.stringMatching(UUID),
      field: 'agentId',
      from: setup.agentId,
      to: pedro!.id,
      actor: { type: 'agent', id: setup.agentId },
      reason: 'Cliente pediu para falar com um atendente',
      createdAt: expect.any(String),
    });
    const { data: thread } = await setup.ws.api.GET('/threads/{id}', { params: { path: { id: first.threadId } } });
    expect(thread!.agentId).toBe(pedro!.id);
    expect((await eventObjects(setup.ws, 'thread.updated')).at(-1)).toEqual(thread);
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);

    // The person's thread: a new message from the customer queues no AI reply.
    await inbound(setup, (await contactPhone(setup.ws, first.contactId))!, 'Oi, Pedro?');
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);
    expect(ai.forModel(setup.model)).toHaveLength(1);
  });

  it('when the AI is unavailable and a person is online, then the thread lands on them with reason ai_unavailable', async () => {
    const setup = await withAgent();
    const { data: pedro } = await setup.ws.api.POST('/agents', { body: buildHuman({ name: 'Pedro' }) });
    ai.answerFor(setup.model, () => errorAnswer(404, 'The model does not exist or you do not have access to it.'));

    const first = await inbound(setup, buildPhone(), 'Oi');

    let history: Entry[] = [];
    await waitFor('the handoff', async () => (history = await historyOf(setup.ws, first.threadId)).length === 4);
    expect(history.at(-1)).toMatchObject({
      field: 'agentId',
      from: setup.agentId,
      to: pedro!.id,
      actor: { type: 'agent', id: setup.agentId },
      reason: 'ai_unavailable',
    });
  });

  async function contactPhone(ws: TestWorkspace, id: string): Promise<string | null | undefined> {
    const { data } = await ws.api.GET('/contacts/{id}', { params: { path: { id } } });
    return data?.phone;
  }

  it('when three messages arrive in a burst, then the AI is called once, answering the latest', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, textAnswer('Entendi, vou ajudar com a troca.'));
    const phone = buildPhone();

    const first = await inbound(setup, phone, 'Oi');
    await inbound(setup, phone, 'Comprei um tênis');
    await inbound(setup, phone, 'Quero trocar pelo 42');

    await waitFor('the answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 4);
    await waitFor('no reply job left', async () => (await aiJobs(setup.ws.workspaceId)).length === 0);
    const requests = ai.forModel(setup.model);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'Oi' },
      { role: 'user', content: 'Comprei um tênis' },
      { role: 'user', content: 'Quero trocar pelo 42' },
    ]);
    const messages = await messagesOf(setup.ws, first.threadId);
    expect(messages.map((m) => [m.direction, m.content])).toEqual([
      ['inbound', 'Oi'],
      ['inbound', 'Comprei um tênis'],
      ['inbound', 'Quero trocar pelo 42'],
      ['outbound', 'Entendi, vou ajudar com a troca.'],
    ]);
  });

  it('when the customer writes again while the AI is answering, then that answer is dropped and the newer message gets the one answer', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, (request) => {
      const last = request.body.messages.at(-1).content as string;
      return textAnswer(`Resposta a: ${last}`, last === 'Oi' ? 800 : undefined)(request);
    });
    const phone = buildPhone();

    const first = await inbound(setup, phone, 'Oi');
    await waitFor('the first call', () => ai.forModel(setup.model).length === 1);
    await inbound(setup, phone, 'Meu pedido atrasou');

    await waitFor('the answer', async () => (await messagesOf(setup.ws, first.threadId)).length === 3);
    await waitFor('no reply job left', async () => (await aiJobs(setup.ws.workspaceId)).length === 0);
    expect(ai.forModel(setup.model).map((r) => r.body.messages.length)).toEqual([2, 3]);
    expect((await messagesOf(setup.ws, first.threadId)).map((m) => [m.direction, m.content])).toEqual([
      ['inbound', 'Oi'],
      ['inbound', 'Meu pedido atrasou'],
      ['outbound', 'Resposta a: Meu pedido atrasou'],
    ]);
  });

  it('when one Meta delivery brings three messages of a customer, then the agent answers once, to the latest, through the Graph API', async () => {
    const setup = await withAgent();
    const meta = await createMetaChannel(setup.ws, 'whatsapp');
    await setup.ws.api.PATCH('/channels/{id}', { params: { path: { id: meta.channel.id } }, body: { defaultAgentId: setup.agentId } });
    ai.answerFor(setup.model, textAnswer('Claro! Qual o número do pedido?'));
    const from = buildPhone().slice(1);
    const texts = ['Oi', 'Preciso de ajuda', 'Com um pedido'];
    const messages = texts.map((body, i) => ({
      from,
      id: `wamid.ai.${randomUUID()}`,
      timestamp: String(Math.floor(Date.now() / 1000) + i),
      type: 'text',
      text: { body },
    }));

    const res = await postWebhook(
      server,
      meta.channel.id,
      whatsappDelivery(meta.externalId, { contacts: [{ profile: { name: 'Mariana Silva' }, wa_id: from }], messages }),
      { appSecret: meta.appSecret },
    );

    expect(res.status).toBe(200);
    await waitFor('the answer sent to Graph', () => graph.to(meta.externalId).length === 2);
    expect(ai.forModel(setup.model).map((r) => r.body.messages.slice(1))).toEqual([texts.map((content) => ({ role: 'user', content }))]);
    // The agent takes the latest message: read, with the typing indicator while it writes, then its answer.
    expect(graph.to(meta.externalId)[0]!.body).toEqual({
      messaging_product: 'whatsapp',
      status: 'read',
      message_id: messages.at(-1)!.id,
      typing_indicator: { type: 'text' },
    });
    expect(graph.to(meta.externalId)[1]!.body).toMatchObject({
      messaging_product: 'whatsapp',
      to: from,
      type: 'text',
      text: { body: 'Claro! Qual o número do pedido?' },
    });
    const { data: threads } = await setup.ws.api.GET('/threads', { params: { query: { channelId: meta.channel.id } } });
    const thread = threads!.data[0]!;
    await waitFor('the answer sent', async () => (await messagesOf(setup.ws, thread.id)).at(-1)?.status === 'sent');
    expect((await messagesOf(setup.ws, thread.id)).at(-1)).toMatchObject({
      direction: 'outbound',
      agentId: setup.agentId,
      externalId: expect.stringMatching(/^wamid\./),
    });
  });

  it('when the thread is closed before the reply runs, then the agent stays silent', async () => {
    const setup = await withAgent();

    const first = await inbound(setup, buildPhone(), 'Oi');
    const { response } = await setup.ws.api.PATCH('/threads/{id}', { params: { path: { id: first.threadId } }, body: { status: 'closed' } });
    expect(response.status).toBe(200);

    await waitFor('no reply job left', async () => (await aiJobs(setup.ws.workspaceId)).length === 0);
    expect(ai.forModel(setup.model)).toEqual([]);
    expect(await messagesOf(setup.ws, first.threadId)).toEqual([first]);
  });

  it('when the AI keeps failing, then after RETRY_MAX_ATTEMPTS calls the thread is handed off with reason ai_unavailable', async () => {
    const setup = await withAgent();
    let calls = 0;
    ai.answerFor(setup.model, () => (++calls === 2 ? { drop: true } : errorAnswer(calls === 1 ? 503 : 500)));

    const first = await inbound(setup, buildPhone(), 'Oi, alguém aí?');

    let history: Entry[] = [];
    await waitFor('the handoff', async () => (history = await historyOf(setup.ws, first.threadId)).length === 4);
    expect(ai.forModel(setup.model)).toHaveLength(MAX_ATTEMPTS);
    expect(history.at(-1)).toMatchObject({
      field: 'agentId',
      from: setup.agentId,
      to: null,
      actor: { type: 'agent', id: setup.agentId },
      reason: 'ai_unavailable',
    });
    expect(await messagesOf(setup.ws, first.threadId)).toEqual([first]);
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);
  });

  it('when the AI refuses the request (a 4xx other than 408 and 429), then the thread is handed off at once with reason ai_unavailable', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, () => errorAnswer(404, 'The model does not exist or you do not have access to it.'));

    const first = await inbound(setup, buildPhone(), 'Oi');

    let history: Entry[] = [];
    await waitFor('the handoff', async () => (history = await historyOf(setup.ws, first.threadId)).length === 4);
    expect(ai.forModel(setup.model)).toHaveLength(1);
    expect(history.at(-1)).toMatchObject({ field: 'agentId', to: null, actor: { type: 'agent', id: setup.agentId }, reason: 'ai_unavailable' });
  });

  it('when the agent is deactivated before its reply runs, then it stays silent', async () => {
    const setup = await withAgent();
    ai.answerFor(setup.model, textAnswer('Olá!'));

    const first = await inbound(setup, buildPhone(), 'Oi');
    const { response } = await setup.ws.api.PATCH('/agents/{id}', { params: { path: { id: setup.agentId } }, body: { status: 'inactive' } });
    expect(response.status).toBe(200);

    await waitFor('no reply job left', async () => (await aiJobs(setup.ws.workspaceId)).length === 0);
    await inbound(setup, (await contactPhone(setup.ws, first.contactId))!, 'Tem alguém?');
    expect(await aiJobs(setup.ws.workspaceId)).toEqual([]);
    expect(ai.forModel(setup.model)).toEqual([]);
    expect((await messagesOf(setup.ws, first.threadId)).map((m) => m.direction)).toEqual(['inbound', 'inbound']);
  });

  it('when the agent is deleted, then it never answers', async () => {
    const setup = await withAgent();

    const first = await inbound(setup, buildPhone(), 'Oi');
    const { response } = await setup.ws.api.DELETE('/agents/{id}', { params: { path: { id: setup.agentId } } });
    expect(response.status).toBe(204);

    await waitFor('no reply job left', async () => (await aiJobs(setup.ws.workspaceId)).length === 0);
    expect(ai.forModel(setup.model)).toEqual([]);
    expect(await messagesOf(setup.ws, first.threadId)).toEqual([first]);
  });

  it("when two threads (and another workspace's) talk to agents at once, then each context holds only its own thread's messages", async () => {
    const setup = await withAgent();
    const other = await withAgent(await createWorkspace(server));
    // The other workspace's agent uses the same model name: only the content tells them apart.
    await other.ws.api.PATCH('/agents/{id}', { params: { path: { id: other.agentId } }, body: { model: setup.model } });
    ai.answerFor(setup.model, textAnswer('Certo.'));

    const [a, b, c] = await Promise.all([
      inbound(setup, buildPhone(), 'Thread A: pedido 1001'),
      inbound(setup, buildPhone(), 'Thread B: pedido 2002'),
      inbound(other, buildPhone(), 'Thread C: pedido 3003'),
    ]);

    for (const [ws, m] of [
      [setup.ws, a],
      [setup.ws, b],
      [other.ws, c],
    ] as const) {
      await waitFor('the answer', async () => (await messagesOf(ws, m.threadId)).length === 2);
    }
    const requests = ai.forModel(setup.model);
    expect(requests).toHaveLength(3);
    const conversations = requests.map((r) => r.body.messages.slice(1).map((m: { content: string }) => m.content)).sort();
    expect(conversations).toEqual([['Thread A: pedido 1001'], ['Thread B: pedido 2002'], ['Thread C: pedido 3003']]);
  });
});

describe.skipIf(!databaseUrl)('without AI_BASE_URL (needs DATABASE_URL)', () => {
  let ai: AiDouble;
  let server: TestServer;
  let own: OwnDatabase | undefined;
  beforeAll(async () => {
    ai = await AiDouble.start();
    own = await ownDatabase();
    server = await startServer({ databaseUrl: own.url, jobs: true, config: { aiBaseUrl: undefined, jobPollMs: 200 } });
  });
  afterAll(async () => {
    await server?.close();
    await ai?.close();
    await own?.drop();
  });

  it('when a customer writes to a thread of an active agent, then the message is stored, nothing is queued for AI and nothing fails', async () => {
    const ws = await createWorkspace(server);
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });
    const channelId = ws.channels.find((c) => c.type === 'whatsapp')!.id;
    await ws.api.PATCH('/channels/{id}', { params: { path: { id: channelId } }, body: { defaultAgentId: agent!.id } });

    const { data: message, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channelId } },
      body: { from: buildPhone(), content: 'Oi' },
    });

    expect(response.status).toBe(201);
    expect(message).toMatchObject({ direction: 'inbound', content: 'Oi', agentId: null });
    const { data: thread } = await ws.api.GET('/threads/{id}', { params: { path: { id: message!.threadId } } });
    expect(thread!.agentId).toBe(agent!.id);
    // Nothing queued in the inbound's transaction: no worker will ever ask the AI.
    expect(await server.db.selectFrom('jobs').selectAll().where('workspace_id', '=', ws.workspaceId).execute()).toEqual([]);
    expect(ai.requests).toEqual([]);
    const { data: messages } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: message!.threadId } } });
    expect(messages!.data).toEqual([message]);
  });
});
