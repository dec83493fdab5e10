// Labels on contacts and threads and custom attributes on contacts (issue 21): the limits (a 400 that
// stores nothing), trimming and merging labels equal but for case, attributes merged with null
// removing a key, the ?label= filters (repeatable, case-insensitive, on their GIN index), a thread's
// label changes in its history and thread.updated, contact.updated as event and webhook, erasure.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, request, type TestWorkspace } from './helpers/api.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type S = components['schemas'];
type Contact = S['Contact'];
type Thread = S['Thread'];

let receiver: WebhookReceiver;
let server: TestServer;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  // Its workers deliver webhooks and take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { outboundAllowPrivateUrls: true, jobPollMs: 100 } });
});
afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await own?.drop();
});

async function createContact(ws: TestWorkspace, overrides: Partial<S['ContactCreate']> = {}): Promise<Contact> {
  const { data, response } = await ws.api.POST('/contacts', { body: buildContact(overrides) });
  expect(response.status).toBe(201);
  return data!;
}

async function openThread(ws: TestWorkspace, labels?: string[]): Promise<Thread> {
  const contact = await createContact(ws);
  const channelId = ws.channels[0]!.id;
  const { data, response } = await ws.api.POST('/threads', { body: { contactId: contact.id, channelId, ...(labels && { labels }) } });
  expect(response.status).toBe(201);
  return data!;
}

async function events(ws: TestWorkspace, type: S['EventType']): Promise<S['Event'][]> {
  const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
  return data!.data;
}

const contactIds = async (ws: TestWorkspace, query: string): Promise<string[]> => {
  const res = await request(server, 'GET', `/v1/contacts?${query}`, { apiKey: ws.apiKey });
  expect(res.status).toBe(200);
  return (res.body as S['ContactList']).data.map((c) => c.id);
};

const threadIds = async (ws: TestWorkspace, query: string): Promise<string[]> => {
  const res = await request(server, 'GET', `/v1/threads?${query}`, { apiKey: ws.apiKey });
  expect(res.status).toBe(200);
  return (res.body as S['ThreadList']).data.map((t) => t.id);
};

/** 400 validation_error naming `path`, and the workspace still has no contact and no event. */
async function expectRefusedCreate(ws: TestWorkspace, body: unknown, path: string): Promise<void> {
  const res = await request(server, 'POST', '/v1/contacts', { apiKey: ws.apiKey, body });
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
  expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
  expect(await contactIds(ws, 'limit=100')).toEqual([]);
  expect(await events(ws, 'contact.created')).toEqual([]);
}

const fifty = 'x'.repeat(50);

describe('POST /contacts with labels and attributes', () => {
  it('when labels repeat but for case and spaces, then each is trimmed and kept once, in its first spelling, and the attributes as sent', async () => {
    const ws = await createWorkspace(server);

    const contact = await createContact(ws, {
      labels: ['  Cliente VIP ', 'Boleto', 'cliente vip', 'BOLETO', 'São Paulo', 'SÃO PAULO', `  ${fifty}  `],
      attributes: { plano: 'premium', pedidos: 12, aceita_marketing: true, nota: -1.5 },
    });

    expect(contact).toEqual({
      id: contact.id,
      name: 'Mariana Silva',
      phone: contact.phone,
      email: 'mariana.silva@exemplo.com.br',
      instagramId: null,
      whatsappUserId: null,
      whatsappUsername: null,
      externalId: null,
      labels: ['Cliente VIP', 'Boleto', 'São Paulo', fifty],
      attributes: { plano: 'premium', pedidos: 12, aceita_marketing: true, nota: -1.5 },
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: contact.createdAt,
    });
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(contact);
    expect((await ws.api.GET('/contacts', {})).data!.data).toEqual([contact]);
    expect((await events(ws, 'contact.created')).map((e) => e.data.object)).toEqual([contact]);
  });

  it('when neither is sent, then labels are [] and attributes {}', async () => {
    const ws = await createWorkspace(server);

    const contact = await createContact(ws);

    expect(contact).toMatchObject({ labels: [], attributes: {} });
  });

  it('when exactly 20 labels and 50 attributes are sent, then they are kept', async () => {
    const ws = await createWorkspace(server);
    const labels = Array.from({ length: 20 }, (_, i) => `label ${i}`);
    const attributes = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a${i}`, 'v'.repeat(500)]));

    const contact = await createContact(ws, { labels, attributes });

    expect(contact.labels).toEqual(labels);
    expect(contact.attributes).toEqual(attributes);
  });

  it.each([
    ['21 labels', { labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }, '/body/labels'],
    ['a label of 51 characters once trimmed', { labels: [` ${fifty}x `] }, '/body/labels/0'],
    ['an empty label', { labels: ['ok', ''] }, '/body/labels/1'],
    ['a label of spaces only', { labels: ['   '] }, '/body/labels/0'],
    ['a label holding U+0000', { labels: ['a\u0000b'] }, '/body/labels/0'],
    ['a label that is not a string', { labels: [7] }, '/body/labels/0'],
    ['51 attributes', { attributes: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`a${i}`, i])) }, '/body/attributes'],
    ['an attribute key with a capital', { attributes: { Plano: 'x' } }, '/body/attributes'],
    ['an attribute key starting with a digit', { attributes: { '1a': 'x' } }, '/body/attributes'],
    ['an attribute key of 41 characters', { attributes: { ['a'.repeat(41)]: 'x' } }, '/body/attributes'],
    ['an attribute string of 501 characters', { attributes: { nota: 'v'.repeat(501) } }, '/body/attributes/nota'],
    ['an attribute that is an object', { attributes: { endereco: { rua: 'x' } } }, '/body/attributes/endereco'],
    ['an attribute that is a list', { attributes: { tags: ['x'] } }, '/body/attributes/tags'],
    ['an attribute that is null (only PATCH removes)', { attributes: { nota: null } }, '/body/attributes/nota'],
    ['attributes that are a list', { attributes: [] }, '/body/attributes'],
  ])('when the body has %s, then 400 and nothing is stored', async (_what, extra, path) => {
    const ws = await createWorkspace(server);

    await expectRefusedCreate(ws, { ...buildContact(), ...extra }, path);
  });
});

describe('labels and names as text (NFC, case folding, code points)', () => {
  const nfd = 'Cafe\u0301 com leite';
  const nfc = 'Caf\u00e9 com leite';

  it('when labels come as NFC/NFD twins or equal by case folding (ß, ς, ﬁ), then each is kept once in NFC, its first spelling', async () => {
    const ws = await createWorkspace(server);

    const contact = await createContact(ws, {
      name: 'Jose\u0301 Mu\u0308ller',
      labels: [nfd, nfc, 'Straße', 'STRASSE', 'ΟΔΟΣ', 'οδοσ', 'ﬁnanceiro', 'FINANCEIRO'],
    });

    expect(contact.labels).toEqual([nfc, 'Straße', 'ΟΔΟΣ', 'ﬁnanceiro']);
    expect(contact.name).toBe('Jos\u00e9 M\u00fcller');
    expect(await contactIds(ws, `label=${encodeURIComponent(nfd)}`)).toEqual([contact.id]);
    expect(await contactIds(ws, 'label=strasse&label=%CE%BF%CE%B4%CE%BF%CF%82&label=FInanceiro')).toEqual([contact.id]);
  });

  it('when a name is corrected to its NFD twin, then nothing changes and no event is recorded', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws, { name: 'Jos\u00e9' });

    const { data } = await ws.api.PATCH('/contacts/{id}', { params: { path: { id: contact.id } }, body: { name: 'Jose\u0301' } });

    expect(data).toEqual(contact);
    expect(await events(ws, 'contact.updated')).toEqual([]);
  });

  it('when an agent is named in NFD, then it is kept in NFC', async () => {
    const ws = await createWorkspace(server);

    const { data } = await ws.api.POST('/agents', { body: { type: 'human', name: 'Joa\u0303o' } });

    expect(data!.name).toBe('Jo\u00e3o');
  });

  it('when a name within its bound as sent would pass it in NFC (ज़ decomposes), then it is a 400 naming it, and nothing is stored', async () => {
    const ws = await createWorkspace(server);
    const long = '\u095b'.repeat(70); // 70 characters sent, 140 in NFC (120 at most)
    const tooLong = {
      code: 'validation_error',
      details: [{ path: '/body/name', message: 'must NOT have more than 120 characters once in Unicode NFC (it has 140)' }],
    };

    const stage = await ws.api.POST('/stages', { body: { name: long } });
    const agent = await ws.api.POST('/agents', { body: { type: 'human', name: long } });
    const policy = await ws.api.POST('/sla-policies', { body: { name: long, targets: { firstResponseMinutes: 30 } } });
    const contact = await ws.api.POST('/contacts', { body: { name: '\u095b'.repeat(101) } });

    for (const { response, error } of [stage, agent, policy]) {
      expect(response.status).toBe(400);
      expect(error!.error).toMatchObject(tooLong);
    }
    expect(contact.error!.error.details).toEqual([{ path: '/body/name', message: 'must NOT have more than 200 characters once in Unicode NFC (it has 202)' }]);
    const { data: stages } = await ws.api.GET('/stages');
    expect(stages!.data.map((s) => s.name)).not.toContain(long.normalize('NFC'));
  });

  it("when a customer's message brings a name past its bound once in NFC, then the message is taken and the name cut to the bound", async () => {
    const ws = await createWorkspace(server);
    const whatsapp = ws.channels.find((c) => c.type === 'whatsapp')!;

    const { data: message, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: whatsapp.id } },
      body: { from: buildPhone(), content: 'Oi', name: '\u095b'.repeat(101) },
    });

    expect(response.status).toBe(201);
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: message!.contactId } } });
    expect([...contact!.name]).toHaveLength(200);
    expect(contact!.name).toBe('\u095b'.repeat(101).normalize('NFC').slice(0, 200));
  });

  it('when a stage, an SLA policy or an automation is named or renamed in NFD, then it is kept in NFC', async () => {
    const ws = await createWorkspace(server);
    const nfd = 'Cafe\u0301 da manha\u0303';
    const nfc = nfd.normalize('NFC');

    const { data: stage } = await ws.api.POST('/stages', { body: { name: nfd } });
    const { data: policy } = await ws.api.POST('/sla-policies', { body: { name: nfd, targets: { firstResponseMinutes: 30 } } });
    const { data: automation } = await ws.api.POST('/automations', {
      body: { name: nfd, trigger: { event: 'thread.created' }, actions: [{ type: 'add_labels', target: 'thread', labels: ['x'] }] },
    });
    const { data: renamed } = await ws.api.PATCH('/stages/{id}', { params: { path: { id: stage!.id } }, body: { name: `${nfd}!` } });
    const { data: repolicy } = await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: policy!.id } }, body: { name: `${nfd}!` } });
    const { data: reautomation } = await ws.api.PATCH('/automations/{id}', { params: { path: { id: automation!.id } }, body: { name: `${nfd}!` } });

    expect([stage!.name, policy!.name, automation!.name]).toEqual([nfc, nfc, nfc]);
    expect([renamed!.name, repolicy!.name, reautomation!.name]).toEqual([`${nfc}!`, `${nfc}!`, `${nfc}!`]);
  });

  it('when a label is 26 emoji (52 UTF-16 units, 26 code points), then a contact keeps it and an automation condition takes it', async () => {
    const ws = await createWorkspace(server);
    const emoji = '😀'.repeat(26);

    expect((await createContact(ws, { labels: [emoji] })).labels).toEqual([emoji]);
    const { response, error } = await ws.api.POST('/automations', {
      body: {
        name: 'Emoji',
        trigger: { event: 'thread.created' },
        conditions: { all: [{ field: 'contact.labels', operator: 'contains', value: emoji }] },
        actions: [{ type: 'add_labels', target: 'contact', labels: [emoji] }],
      },
    });
    expect(error).toBeUndefined();
    expect(response.status).toBe(201);
  });

  it('when a label is İ, then it is one label with i̇ (its full case folding) and another than i', async () => {
    const ws = await createWorkspace(server);

    const contact = await createContact(ws, { labels: ['İstanbul', 'i\u0307stanbul', 'istanbul'] });

    expect(contact.labels).toEqual(['İstanbul', 'istanbul']);
    expect(await contactIds(ws, `label=${encodeURIComponent('i\u0307STANBUL')}`)).toEqual([contact.id]);
  });
});

describe('PATCH /contacts/{id} with labels and attributes', () => {
  it('when labels and attributes change, then labels are the new list, attributes merge (null removes), and contact.updated carries the contact', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws, { labels: ['VIP', 'Boleto'], attributes: { plano: 'basic', pedidos: 1, cupom: 'X10' } });

    const { data, response } = await ws.api.PATCH('/contacts/{id}', {
      params: { path: { id: contact.id } },
      body: { labels: ['Recorrente', ' vip ', 'recorrente'], attributes: { plano: 'premium', cupom: null, aceita_marketing: false, inexistente: null } },
    });

    expect(response.status).toBe(200);
    expect(data).toEqual({
      ...contact,
      labels: ['Recorrente', 'vip'],
      attributes: { plano: 'premium', pedidos: 1, aceita_marketing: false },
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(data);
    const [updated, ...more] = await events(ws, 'contact.updated');
    expect(more).toEqual([]);
    expect(updated!.data).toEqual({ object: data, actor: { type: 'api_key', id: ws.keyId } });
  });

  it('when a name, phone or e-mail is corrected, then it is a contact.updated too', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws);

    const { data } = await ws.api.PATCH('/contacts/{id}', { params: { path: { id: contact.id } }, body: { name: 'Mariana Souza', email: null } });

    expect((await events(ws, 'contact.updated')).map((e) => e.data.object)).toEqual([data]);
  });

  it('when the body changes nothing (same values, a null for a missing key, labels equal once trimmed), then 200 with the contact as it was, and no event', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws, { labels: ['VIP'], attributes: { plano: 'basic' } });

    const { data } = await ws.api.PATCH('/contacts/{id}', {
      params: { path: { id: contact.id } },
      body: { name: contact.name, labels: [' VIP', 'vip'], attributes: { plano: 'basic', cupom: null } },
    });

    expect(data).toEqual(contact);
    expect(await events(ws, 'contact.updated')).toEqual([]);
  });

  it('when the merge would leave 51 attributes, then 400 naming /body/attributes and nothing changes; removing one in the same body makes room', async () => {
    const ws = await createWorkspace(server);
    const attributes = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a${i}`, i]));
    const contact = await createContact(ws, { attributes });

    const refused = await request(server, 'PATCH', `/v1/contacts/${contact.id}`, {
      apiKey: ws.apiKey,
      body: { name: 'Outra', labels: ['x'], attributes: { extra: 1 } },
    });

    expect(refused.status).toBe(400);
    expect(refused.body.error).toEqual({
      code: 'validation_error',
      message: 'The request does not match the contract.',
      requestId: expect.any(String),
      details: [{ path: '/body/attributes', message: 'must leave the contact at most 50 attributes (this change leaves 51)' }],
    });
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(contact);
    expect(await events(ws, 'contact.updated')).toEqual([]);

    const { data, response } = await ws.api.PATCH('/contacts/{id}', { params: { path: { id: contact.id } }, body: { attributes: { extra: 1, a0: null } } });
    expect(response.status).toBe(200);
    expect(Object.keys(data!.attributes)).toHaveLength(50);
    expect(data!.attributes).toMatchObject({ extra: 1, a49: 49 });
    expect(data!.attributes).not.toHaveProperty('a0');
  });

  it.each([
    ['21 labels', { labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }, '/body/labels'],
    ['a label of 51 characters', { labels: [`${fifty}x`] }, '/body/labels/0'],
    ['101 attribute changes', { attributes: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`a${i}`, null])) }, '/body/attributes'],
    ['an attribute key with a dash', { attributes: { 'meu-plano': 'x' } }, '/body/attributes'],
  ])('when the body has %s, then 400 and nothing changes', async (_what, body, path) => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws, { labels: ['VIP'] });

    const res = await request(server, 'PATCH', `/v1/contacts/${contact.id}`, { apiKey: ws.apiKey, body: { name: 'Outra', ...body } });

    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(contact);
  });

  it('when an endpoint subscribes to contact.updated, then it receives the change signed, as GET /events/{id} shows it', async () => {
    const ws = await createWorkspace(server);
    const path = `/labels-${randomUUID()}`;
    expect((await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}${path}`, events: ['contact.updated'] } })).response.status).toBe(201);
    const contact = await createContact(ws);

    const { data } = await ws.api.PATCH('/contacts/{id}', {
      params: { path: { id: contact.id } },
      body: { labels: ['VIP'], attributes: { plano: 'premium' } },
    });

    const [received, ...more] = await receiver.waitFor(1, path);
    expect(more).toEqual([]);
    const delivered = JSON.parse(received!.body) as S['Event'];
    expect(delivered).toMatchObject({ type: 'contact.updated', data: { object: data, actor: { type: 'api_key', id: ws.keyId } } });
    expect(received!.headers['webhook-id']).toBe(delivered.id);
    expect((await ws.api.GET('/events/{id}', { params: { path: { id: delivered.id } } })).data).toEqual(delivered);
  });
});

describe('?label= filters', () => {
  it('when contacts are listed by one or several labels, then the match ignores case and spaces, all labels must match, and another workspace never shows', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const both = await createContact(ws, { labels: ['Cliente VIP', 'São Paulo'] });
    const vip = await createContact(ws, { labels: ['cliente vip'] });
    await createContact(ws, { labels: ['Boleto'] });
    await createContact(ws);
    await createContact(other, { labels: ['Cliente VIP', 'São Paulo'] });

    expect(await contactIds(ws, 'label=CLIENTE%20VIP')).toEqual([both.id, vip.id]);
    expect(await contactIds(ws, 'label=%20cliente%20vip%20&label=s%C3%83O%20PAULO')).toEqual([both.id]);
    expect(await contactIds(ws, 'label=cliente%20vip&label=boleto')).toEqual([]);
    expect(await contactIds(ws, 'label=nenhum')).toEqual([]);
    const res = await request(server, 'GET', '/v1/contacts?label=cliente%20vip&limit=1&page=2', { apiKey: ws.apiKey });
    expect(res.body).toEqual({ data: [vip], pagination: { total: 2, page: 2, limit: 1 } });
  });

  it('when threads are listed by labels, then the same rules hold, with the other filters', async () => {
    const ws = await createWorkspace(server);
    const first = await openThread(ws, ['Boleto', 'Urgente']);
    const second = await openThread(ws, ['boleto']);
    await openThread(ws);

    expect(await threadIds(ws, 'label=BOLETO')).toEqual([second.id, first.id]);
    expect(await threadIds(ws, 'label=boleto&label=urgente')).toEqual([first.id]);
    expect(await threadIds(ws, `label=boleto&contactId=${second.contactId}`)).toEqual([second.id]);

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: second.id } }, body: { labels: ['Urgente', 'Boleto'] } });
    expect(await threadIds(ws, 'label=boleto&label=urgente')).toEqual([second.id, first.id]);
  });

  it('when a label is written as forms and URLSearchParams write it (a space as +, : / , $ left as they are), then it matches, on contacts and threads', async () => {
    const ws = await createWorkspace(server);
    const labels = ['Cliente VIP', 'prio:alta', 'SP/RJ', 'a,b', 'R$ 100'];
    const contact = await createContact(ws, { labels });
    const thread = await openThread(ws, labels);

    const query = new URLSearchParams(labels.map((label): [string, string] => ['label', label])).toString();
    expect(query).toContain('label=Cliente+VIP');
    expect(await contactIds(ws, query)).toEqual([contact.id]);
    expect(await threadIds(ws, query)).toEqual([thread.id]);
    expect(await contactIds(ws, 'label=prio:alta&label=SP/RJ&label=a,b&label=R$+100')).toEqual([contact.id]);
    // A + written as %2B is a +, not a space.
    expect(await contactIds(ws, 'label=Cliente%2BVIP')).toEqual([]);
  });

  it.each([
    ['/v1/contacts', `label=${fifty}x`],
    ['/v1/threads', 'label=%20%20'],
    ['/v1/contacts', 'label='],
  ])('when %s is filtered by a label no contact may have (%s), then 400', async (path, query) => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', `${path}?${query}`, { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
  });

  it('when a workspace has thousands of contacts and another has thousands with the label, then the list by a rare label reads the GIN index', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const rare = await createContact(ws, { labels: ['Raro'] });
    const seed = (workspaceId: string, count: number, label: string | null) => sql`
      insert into contacts (workspace_id, id, name, labels, label_keys, created_at, updated_at)
      select ${workspaceId}::uuid, gen_random_uuid(), 'Contato ' || n,
             ${label === null ? sql`'{}'::text[]` : sql`array[${label}]`}, ${label === null ? sql`'{}'::text[]` : sql`array[${`${workspaceId}:${label.toLowerCase()}`}]`},
             now(), now()
        from generate_series(1, ${count}) n`;
    await seed(ws.workspaceId, 20_000, 'Comum').execute(server.db);
    await seed(other.workspaceId, 20_000, 'Raro').execute(server.db);
    // As autovacuum would: the GIN index's pending list (fastupdate) moves into the index, the statistics are taken.
    await sql`analyze contacts`.execute(server.db);

    // The page of the list's statement (db/pagination.ts, matches first) for GET /contacts?label=raro.
    const plan = await sql<{ 'QUERY PLAN': string }>`
      explain select * from (select * from contacts
                              where workspace_id = ${ws.workspaceId} and erased_at is null and label_keys @> ${[`${ws.workspaceId}:raro`]}::text[]
                             offset 0) as m
       order by created_at, id limit 20 offset 0`.execute(server.db);
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');

    expect(text).toContain('contacts_label_keys_idx');
    expect(await contactIds(ws, 'label=raro')).toEqual([rare.id]);
    expect(await contactIds(ws, 'label=comum&limit=1')).toHaveLength(1);
  }, 60_000);
});

describe('thread labels', () => {
  it('when a thread opens with labels, then they are kept as a contact’s, in its thread.created and in its opening history', async () => {
    const ws = await createWorkspace(server);

    const thread = await openThread(ws, [' Boleto ', 'boleto', 'Urgente']);

    expect(thread.labels).toEqual(['Boleto', 'Urgente']);
    expect((await events(ws, 'thread.created')).map((e) => e.data.object)).toEqual([thread]);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: thread.id } } });
    expect(history!.data.map(({ field, from, to }) => ({ field, from, to }))).toEqual([
      { field: 'status', from: null, to: 'open' },
      { field: 'stageId', from: null, to: thread.stageId },
      { field: 'labels', from: null, to: ['Boleto', 'Urgente'] },
    ]);
  });

  it('when a thread opens without labels, then its history has no labels entry', async () => {
    const ws = await createWorkspace(server);

    const thread = await openThread(ws);

    expect(thread.labels).toEqual([]);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: thread.id } } });
    expect(history!.data.map((e) => e.field)).toEqual(['status', 'stageId']);
  });

  it('when its labels change, then one history entry holds the lists before and after, with the key and reason, and thread.updated the thread', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws, ['Boleto']);

    const { data: changed } = await ws.api.PATCH('/threads/{id}', {
      params: { path: { id: thread.id } },
      body: { labels: ['Boleto', 'Urgente', 'URGENTE'], status: 'closed', reason: 'Cliente ligou' },
    });
    const { data: cleared } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread.id } }, body: { labels: [] } });
    const { data: same } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread.id } }, body: { labels: [] } });

    expect(changed).toEqual({
      ...thread,
      labels: ['Boleto', 'Urgente'],
      status: 'closed',
      closedAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect(cleared).toEqual({ ...changed, labels: [], updatedAt: expect.stringMatching(ISO_MS) });
    expect(same).toEqual(cleared);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: thread.id } } });
    const key = { type: 'api_key', id: ws.keyId };
    expect(history!.data.slice(3).map(({ field, from, to, actor, reason }) => ({ field, from, to, actor, reason }))).toEqual([
      { field: 'status', from: 'open', to: 'closed', actor: key, reason: 'Cliente ligou' },
      { field: 'labels', from: ['Boleto'], to: ['Boleto', 'Urgente'], actor: key, reason: 'Cliente ligou' },
      { field: 'labels', from: ['Boleto', 'Urgente'], to: [], actor: key, reason: null },
    ]);
    expect((await events(ws, 'thread.updated')).map((e) => e.data.object)).toEqual([cleared, changed]);
  });

  it('when a label change breaks a limit, then 400 and the thread, its history and its events are unchanged', async () => {
    const ws = await createWorkspace(server);
    const thread = await openThread(ws, ['Boleto']);

    const res = await request(server, 'PATCH', `/v1/threads/${thread.id}`, { apiKey: ws.apiKey, body: { status: 'closed', labels: ['ok', ' '] } });

    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain('/body/labels/1');
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } })).data).toEqual(thread);
    expect(await events(ws, 'thread.updated')).toEqual([]);
  });
});

describe('erasure', () => {
  it('when a contact with labels and attributes is erased, then they go with it (row, filter, events), and its threads keep theirs', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws, { labels: ['VIP'], attributes: { cpf: '123.456.789-00' } });
    await ws.api.PATCH('/contacts/{id}', { params: { path: { id: contact.id } }, body: { attributes: { plano: 'premium' } } });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact.id, channelId: ws.channels[0]!.id, labels: ['Boleto'] } });

    expect((await ws.api.DELETE('/contacts/{id}', { params: { path: { id: contact.id } } })).response.status).toBe(204);

    const row = await server.db
      .selectFrom('contacts')
      .select(['labels', 'label_keys', 'attributes'])
      .where('workspace_id', '=', ws.workspaceId)
      .where('id', '=', contact.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ labels: [], label_keys: [], attributes: {} });
    expect(await contactIds(ws, 'label=vip')).toEqual([]);
    expect(await events(ws, 'contact.created')).toEqual([]);
    expect(await events(ws, 'contact.updated')).toEqual([]);
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: thread!.id } } })).data!.labels).toEqual(['Boleto']);
  });
});
