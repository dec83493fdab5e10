// Who made each change, as events tell it (`data.actor`, openapi.yaml's Actor): the API key of the
// request that made it, the AI agent for its reply and handoff, the system for what a customer's
// message brings and for a message's delivery and statuses; the same actor as the thread's history;
// in GET /events, GET /events/{id} and the webhook body alike. Doubles only at the network edge:
// Meta's Graph API, an AI provider, an integrator's receiver.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, buildPhone, createWorkspace, type TestWorkspace } from './helpers/api.js';
import { AiDouble, textAnswer, toolCallAnswer } from './helpers/ai.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { GraphDouble, whatsappDelivery, whatsappStatus, whatsappText } from './helpers/graph.js';
import { waitFor } from './helpers/processes.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Event = components['schemas']['Event'];
type EventType = components['schemas']['EventType'];
type Actor = components['schemas']['Actor'];

const SYSTEM: Actor = { type: 'system', id: null };
const keyOf = (ws: TestWorkspace): Actor => ({ type: 'api_key', id: ws.keyId });

let graph: GraphDouble;
let ai: AiDouble;
let receiver: WebhookReceiver;
let server: TestServer;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  graph = await GraphDouble.start();
  ai = await AiDouble.start();
  receiver = await WebhookReceiver.start();
  // Its workers take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({
    databaseUrl: own?.url,
    jobs: true,
    config: { metaGraphUrl: graph.url, aiBaseUrl: ai.url, aiApiKey: 'sk-test', aiReplyDelayMs: 50, outboundAllowPrivateUrls: true, jobPollMs: 100 },
  });
});
afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await ai?.close();
  await graph?.close();
  await own?.drop();
});

async function events(ws: TestWorkspace, type?: EventType): Promise<Event[]> {
  const { data, response } = await ws.api.GET('/events', { params: { query: { limit: 100, ...(type && { type }) } } });
  expect(response.status).toBe(200);
  return data!.data;
}

/** The actors of the workspace's events of each type, oldest first. */
async function actorsByType(ws: TestWorkspace): Promise<Partial<Record<EventType, Array<Actor | null>>>> {
  const byType: Partial<Record<EventType, Array<Actor | null>>> = {};
  for (const event of (await events(ws)).reverse()) (byType[event.type] ??= []).push(event.data.actor);
  return byType;
}

const objectIdOf = (event: Event): string => (event.data.object as { id: string }).id;

describe('changes made with an API key', () => {
  it('when each kind of change is made through the API, then its event names the key that made it, and a message’s delivery names the system', async () => {
    const ws = await createWorkspace(server);
    const channelId = ws.channels.find((c) => c.type === 'whatsapp')!.id;
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: other } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId, agentId: agent!.id } });
    const { data: stages } = await ws.api.GET('/stages');
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { stageId: stages!.data[1]!.id } });
    // Opens the other contact's thread: thread.created by the key that sent it.
    await ws.api.POST('/messages', { body: { contactId: other!.id, channelId, content: 'Olá!' } });
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread!.id } }, body: { score: 10 } });
    // Unassigns the thread: thread.updated by the key that deleted the agent.
    await ws.api.DELETE('/agents/{id}', { params: { path: { id: agent!.id } } });
    await waitFor('the sandbox delivered the message', async () => (await events(ws, 'message.updated')).length === 2);

    const key = keyOf(ws);
    expect(await actorsByType(ws)).toEqual({
      'contact.created': [key, key],
      'thread.created': [key, key],
      'thread.updated': [key, key],
      'message.created': [key],
      'message.updated': [SYSTEM, SYSTEM],
      'nps.answered': [key],
    });
  });

  it('when two keys of one workspace make changes, then each event names its own key, as the thread’s history does', async () => {
    const first = await createWorkspace(server);
    const second = await createWorkspace(server, { workspaceId: first.workspaceId });
    const channelId = first.channels[0]!.id;
    const { data: contact } = await first.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await second.api.POST('/threads', { body: { contactId: contact!.id, channelId } });
    await first.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { status: 'closed', reason: 'resolvido' } });

    const all = await events(first);
    const { data: history } = await first.api.GET('/threads/{id}/history', { params: { path: { id: thread!.id } } });

    expect(all.map((e) => [e.type, e.data.actor])).toEqual([
      ['thread.updated', keyOf(first)],
      ['thread.created', keyOf(second)],
      ['contact.created', keyOf(first)],
    ]);
    expect(history!.data.map((entry) => [entry.field, entry.actor])).toEqual([
      ['status', keyOf(second)],
      ['stageId', keyOf(second)],
      ['status', keyOf(first)],
    ]);
  });
});

describe('changes the service makes', () => {
  it('when a customer writes on a sandbox channel for the first time, then their contact, thread and message are the system’s', async () => {
    const ws = await createWorkspace(server);
    const channelId = ws.channels.find((c) => c.type === 'whatsapp')!.id;
    const { response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channelId } },
      body: { from: buildPhone(), content: 'Oi!' },
    });
    expect(response.status).toBe(201);

    expect(await actorsByType(ws)).toEqual({ 'contact.created': [SYSTEM], 'thread.created': [SYSTEM], 'message.created': [SYSTEM] });
  });

  it('when Meta delivers a customer’s message and the statuses of a message sent with a key, then those are the system’s and the sent message the key’s', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const phone = buildPhone();
    const inbound = whatsappText(phone.slice(1), 'Bom dia', 'Rita');
    const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, inbound), { appSecret: meta.appSecret });
    expect(res.status).toBe(200);
    const [created] = await events(ws, 'message.created');
    const contactId = (created!.data.object as { contactId: string }).contactId;
    const { data: sent } = await ws.api.POST('/messages', { body: { contactId, channelId: meta.channel.id, content: 'Bom dia, Rita!' } });
    let wamid = '';
    await waitFor('the Graph API took the message', async () => {
      const [sentEvent] = await events(ws, 'message.updated');
      wamid = (sentEvent?.data.object as { externalId?: string } | undefined)?.externalId ?? '';
      return wamid !== '';
    });
    await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, { statuses: [whatsappStatus(wamid, 'delivered', phone.slice(1))] }), {
      appSecret: meta.appSecret,
    });

    const all = (await events(ws)).reverse();
    expect(all.map((e) => [e.type, e.data.actor])).toEqual([
      ['contact.created', SYSTEM],
      ['thread.created', SYSTEM],
      ['message.created', SYSTEM],
      ['message.created', keyOf(ws)],
      ['message.updated', SYSTEM],
      ['message.updated', SYSTEM],
    ]);
    expect(all.slice(3).map(objectIdOf)).toEqual([sent!.id, sent!.id, sent!.id]);
    expect(all.slice(4).map((e) => (e.data.object as { status: string }).status)).toEqual(['sent', 'delivered']);
  });
});

describe.skipIf(!databaseUrl)('changes an AI agent makes (needs DATABASE_URL)', () => {
  /** A workspace whose sandbox WhatsApp channel gives new threads to an agent with a model of its own. */
  async function withAgent(): Promise<{ ws: TestWorkspace; channelId: string; agentId: string; model: string }> {
    const ws = await createWorkspace(server);
    const model = `gpt-test-${randomUUID()}`;
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent({ model }) });
    const channelId = ws.channels.find((c) => c.type === 'whatsapp')!.id;
    await ws.api.PATCH('/channels/{id}', { params: { path: { id: channelId } }, body: { defaultAgentId: agent!.id } });
    return { ws, channelId, agentId: agent!.id, model };
  }

  it('when an agent answers a customer, then its message is the agent’s, the customer’s the system’s', async () => {
    const { ws, channelId, agentId, model } = await withAgent();
    ai.answerFor(model, textAnswer('Olá! Como posso ajudar?'));
    await ws.api.POST('/channels/{id}/sandbox/inbound', { params: { path: { id: channelId } }, body: { from: buildPhone(), content: 'Oi' } });

    await waitFor('the agent answered', async () => (await events(ws, 'message.created')).length === 2);

    const created = (await events(ws, 'message.created')).reverse();
    expect(created.map((e) => [(e.data.object as { direction: string }).direction, e.data.actor])).toEqual([
      ['inbound', SYSTEM],
      ['outbound', { type: 'agent', id: agentId }],
    ]);
  });

  it('when an agent hands the thread off, then thread.updated is the agent’s, as its history entry is', async () => {
    const { ws, channelId, agentId, model } = await withAgent();
    ai.answerFor(model, toolCallAnswer({ reason: 'Cliente pediu um atendente' }));
    const { data: message } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channelId } },
      body: { from: buildPhone(), content: 'Quero uma pessoa' },
    });

    await waitFor('the handoff', async () => (await events(ws, 'thread.updated')).length === 1);

    const [updated] = await events(ws, 'thread.updated');
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: message!.threadId } } });
    expect(updated!.data.actor).toEqual({ type: 'agent', id: agentId });
    expect(history!.data.at(-1)!.actor).toEqual({ type: 'agent', id: agentId });
  });
});

describe('reading', () => {
  it('when an event is read by id and delivered to an endpoint, then both carry the same actor as the list', async () => {
    const ws = await createWorkspace(server);
    const path = `/actors-${randomUUID()}`;
    const { response } = await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}${path}`, events: ['contact.created'] } });
    expect(response.status).toBe(201);
    await ws.api.POST('/contacts', { body: buildContact() });

    const [received] = await receiver.waitFor(1, path);
    const [listed] = await events(ws);
    const { data: read } = await ws.api.GET('/events/{id}', { params: { path: { id: listed!.id } } });

    expect(listed!.data.actor).toEqual(keyOf(ws));
    expect(read).toEqual(listed);
    expect(JSON.parse(received!.body)).toEqual(listed);
  });

  it('when an event was recorded before actors were, then its actor is null', async () => {
    const ws = await createWorkspace(server);
    await ws.api.POST('/contacts', { body: buildContact() });
    const [event] = await events(ws);
    // As migration 0013 leaves the events recorded before it.
    await server.db.updateTable('events').set({ actor_type: null, actor_id: null }).where('id', '=', event!.id).execute();

    const [listed] = await events(ws);
    const { data: read } = await ws.api.GET('/events/{id}', { params: { path: { id: event!.id } } });

    expect(listed).toEqual({ ...event, data: { ...event!.data, actor: null } });
    expect(read).toEqual(listed);
  });
});
