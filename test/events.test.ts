// The event log: each change the API exposes records its event (the object as the API returned it)
// in the change's transaction; GET /events lists them newest first with a type filter; another
// workspace never sees them; erasing a contact scrubs them; the service purges them after 30 days.
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { spec } from '../src/contract.js';
import { purgeOldEvents } from '../src/events/record.js';
import { bindInputs, fanOut, registerEventConsumer, statementTemplate } from '../src/events/fan-out.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Event = components['schemas']['Event'];
type EventType = components['schemas']['EventType'];

let server: TestServer;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  // Its workers (the sandbox's sent/delivered) take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { jobPollMs: 100 } });
});
afterAll(async () => {
  await server.close();
  await own?.drop();
});

async function events(ws: TestWorkspace, type?: EventType, limit = 100): Promise<Event[]> {
  const { data, response } = await ws.api.GET('/events', { params: { query: { limit, ...(type && { type }) } } });
  expect(response.status).toBe(200);
  return data!.data;
}

const objectsOf = (list: Event[], type: EventType): unknown[] => list.filter((e) => e.type === type).map((e) => e.data.object);

describe('recording', () => {
  it('when each kind of change happens through the API, then its event carries the object exactly as the API answered it', async () => {
    const ws = await createWorkspace(server);
    const channel = ws.channels.find((c) => c.type === 'whatsapp')!;
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: channel.id } });
    const { data: stages } = await ws.api.GET('/stages');
    const { data: moved } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { stageId: stages!.data[1]!.id } });
    const { data: message } = await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId: channel.id, content: 'Olá!' } });
    const { data: answered } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread!.id } }, body: { score: 9 } });
    // The sandbox delivers it: queued -> sent -> delivered, each a message.updated.
    await waitFor('message delivered', async () => objectsOf(await events(ws, 'message.updated'), 'message.updated').length >= 2);

    const all = await events(ws);
    expect(objectsOf(all, 'contact.created')).toEqual([contact]);
    expect(objectsOf(all, 'thread.created')).toEqual([thread]);
    expect(objectsOf(all, 'thread.updated')).toEqual([moved]);
    expect(objectsOf(all, 'message.created')).toEqual([message]);
    expect(objectsOf(all, 'nps.answered')).toEqual([answered]);
    const updates = objectsOf(all, 'message.updated') as Array<components['schemas']['Message']>;
    expect(updates.map((m) => m.status)).toEqual(['delivered', 'sent']);
    const { data: listed } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: thread!.id } } });
    expect(updates[0]).toEqual(listed!.data[0]);
    for (const event of all) {
      expect(event.id).toMatch(UUID);
      expect(event.createdAt).toMatch(ISO_MS);
      expect(Object.keys(event).sort()).toEqual(['createdAt', 'data', 'id', 'type']);
    }
  });

  it('when a customer writes on a sandbox channel for the first time, then contact.created, thread.created and message.created (inbound) are recorded', async () => {
    const ws = await createWorkspace(server);
    const channel = ws.channels.find((c) => c.type === 'whatsapp')!;
    const phone = buildPhone();
    const res = await request(server, 'POST', `/v1/channels/${channel.id}/sandbox/inbound`, {
      apiKey: ws.apiKey,
      body: { from: phone, content: 'Oi, preciso de ajuda', name: 'Rita' },
    });
    expect(res.status).toBe(201);

    const all = await events(ws);
    expect(all.map((e) => e.type).sort()).toEqual(['contact.created', 'message.created', 'thread.created']);
    expect(objectsOf(all, 'message.created')).toEqual([res.body]);
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: res.body.contactId } } });
    expect(objectsOf(all, 'contact.created')).toEqual([contact]);
  });

  it('when a change is refused, then no event is recorded', async () => {
    const ws = await createWorkspace(server);
    const phone = buildPhone();
    await ws.api.POST('/contacts', { body: buildContact({ phone }) });
    const { response } = await ws.api.POST('/contacts', { body: buildContact({ phone }) });
    expect(response.status).toBe(409);

    expect((await events(ws)).map((e) => e.type)).toEqual(['contact.created']);
  });

  it('when an agent is deleted, then each thread it unassigned records thread.updated with agentId null', async () => {
    const ws = await createWorkspace(server);
    const { data: agent } = await ws.api.POST('/agents', { body: { name: 'Ana', instructions: 'Seja breve.', model: 'gpt-4o-mini' } });
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id, agentId: agent!.id } });
    await ws.api.DELETE('/agents/{id}', { params: { path: { id: agent!.id } } });

    const updated = objectsOf(await events(ws, 'thread.updated'), 'thread.updated') as Array<components['schemas']['Thread']>;
    expect(updated).toHaveLength(1);
    expect(updated[0]).toMatchObject({ id: thread!.id, agentId: null });
  });
});

describe('the contract', () => {
  it("describes each event type's webhook: an entry of `webhooks` whose body is the type's Event schema", () => {
    const types = spec.components.schemas.EventType.enum as string[];
    const described = Object.entries<any>(spec.webhooks).map(([name, item]) => ({
      name,
      schema: item.post.requestBody.content['application/json'].schema.$ref as string,
    }));
    expect(described.map((d) => d.name).sort()).toEqual([...types].sort());
    for (const { name, schema } of described) {
      const event = spec.components.schemas[schema.split('/').pop()!];
      expect(event.properties.type.const, name).toBe(name);
    }
  });
});

describe('reading', () => {
  it('when events are listed, then they come newest first, filtered by type, in pages', async () => {
    const ws = await createWorkspace(server);
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await ws.api.POST('/contacts', { body: buildContact() })).data!);
    await ws.api.POST('/threads', { body: { contactId: made[0]!.id, channelId: ws.channels[0]!.id } });

    const { data: page1 } = await ws.api.GET('/events', { params: { query: { type: 'contact.created', limit: 2 } } });
    const { data: page2 } = await ws.api.GET('/events', { params: { query: { type: 'contact.created', limit: 2, page: 2 } } });

    expect(page1!.pagination).toEqual({ total: 3, page: 1, limit: 2 });
    expect([...page1!.data, ...page2!.data].map((e) => (e.data.object as { id: string }).id)).toEqual(made.map((c) => c.id).reverse());
    expect((await events(ws)).map((e) => e.type)).toEqual(['thread.created', 'contact.created', 'contact.created', 'contact.created']);
  });

  it('when an event is read by id, then it is the listed one; another workspace gets 404 and never lists it', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    await ws.api.POST('/contacts', { body: buildContact() });
    const [event] = await events(ws);

    const { data } = await ws.api.GET('/events/{id}', { params: { path: { id: event!.id } } });
    const { response } = await other.api.GET('/events/{id}', { params: { path: { id: event!.id } } });

    expect(data).toEqual(event);
    expect(response.status).toBe(404);
    expect(await events(other)).toEqual([]);
  });

  it('when a key lacks webhooks:read, then GET /events is 403', async () => {
    const ws = await createWorkspace(server, { scopes: ['contacts:read', 'webhooks:write'] });
    const res = await request(server, 'GET', '/v1/events', { apiKey: ws.apiKey });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
  });
});

describe('keeping', () => {
  it('when a contact is erased, then their contact.created events are gone and their messages’ events have no content', async () => {
    const ws = await createWorkspace(server);
    const channel = ws.channels.find((c) => c.type === 'whatsapp')!;
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: keep } = await ws.api.POST('/contacts', { body: buildContact() });
    await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId: channel.id, content: 'Dados pessoais' } });
    await ws.api.POST('/messages', { body: { contactId: keep!.id, channelId: channel.id, content: 'Fica' } });
    await ws.api.DELETE('/contacts/{id}', { params: { path: { id: contact!.id } } });

    const all = await events(ws);
    expect(objectsOf(all, 'contact.created')).toEqual([keep]);
    const messages = all.filter((e) => e.type.startsWith('message.')).map((e) => e.data.object as components['schemas']['Message']);
    expect(messages.filter((m) => m.contactId === contact!.id).every((m) => m.content === null)).toBe(true);
    expect(messages.filter((m) => m.contactId === keep!.id).every((m) => m.content === 'Fica')).toBe(true);
    expect(JSON.stringify(all)).not.toContain(contact!.phone!);
  });

  it('when events are older than 30 days, then the purge deletes them and keeps the rest', async () => {
    const ws = await createWorkspace(server);
    await ws.api.POST('/contacts', { body: buildContact() });
    await ws.api.POST('/contacts', { body: buildContact() });
    const [newer, older] = await events(ws);
    await sql`update events set created_at = now() - interval '31 days' where workspace_id = ${ws.workspaceId} and id = ${older!.id}`.execute(server.db);

    const deleted = await purgeOldEvents(server.db);

    expect(deleted).toBeGreaterThanOrEqual(1);
    expect((await events(ws)).map((e) => e.id)).toEqual([newer!.id]);
  });
});

describe('the recording statement, compiled once per shape (events/fan-out.ts)', () => {
  it("when a consumer uses the event's values as placeholders, then each event's values fill them in, constants staying", () => {
    registerEventConsumer('test-placeholders', ({ workspaceId, now }) => ({
      with: sql`, t as (select ${workspaceId}::uuid, ${now}::timestamptz, ${'kept'}::text)`,
      notify: sql``,
    }));
    try {
      const parts = fanOut('contact.created', 'system', false);
      const template = statementTemplate(sql`select 1${parts.with}`.compile(server.db));
      const now = new Date('2026-12-06T05:00:00.123Z');

      const bound = bindInputs(template, { workspaceId: 'w-1', id: 'e-1', chain: '[]', root: null, now });

      expect(bound.parameters.slice(-3)).toEqual(['w-1', '2026-12-06T05:00:00.123Z', 'kept']);
    } finally {
      registerEventConsumer('test-placeholders', undefined);
    }
  });

  it('when a consumer computes a value from a placeholder (a derived instant, a key), then the statement is refused instead of storing one value for every event', () => {
    const derived = [
      ({ now }: { now: Date }) => sql`${new Date(now.getTime() + 1000)}::timestamptz`,
      ({ workspaceId }: { workspaceId: string }) => sql`${`idle:${workspaceId}`}`,
    ];
    for (const [i, part] of derived.entries()) {
      registerEventConsumer(`test-derived-${i}`, (event) => ({ with: sql`, t as (select ${part(event)})`, notify: sql`` }));
      try {
        const parts = fanOut('contact.created', 'system', false);
        expect(() => statementTemplate(sql`select 1${parts.with}`.compile(server.db))).toThrow(/computed a statement value from an event's placeholder/);
      } finally {
        registerEventConsumer(`test-derived-${i}`, undefined);
      }
    }
  });

  it('when a constant is sent as it is, then it is no placeholder', () => {
    const template = statementTemplate(CompiledQuery.raw('select $1::int', [7]));

    expect(bindInputs(template, { now: new Date() }).parameters).toEqual([7]);
  });
});
