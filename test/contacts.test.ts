// Contacts: list (q, phone and email filters, order, pagination), get, create (phone unique per
// workspace); no update or delete in v1.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, buildPhone, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Contact = components['schemas']['Contact'];
type ContactCreate = components['schemas']['ContactCreate'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const MISSING_ID = '01935f50-1c2d-7e3f-8a4b-6c7d8e9f0a1b';
const CONTACT_NOT_FOUND = { error: { code: 'not_found', message: 'Contact not found.', requestId: expect.any(String) } };

async function createContacts(ws: TestWorkspace, bodies: ContactCreate[]): Promise<Contact[]> {
  const contacts: Contact[] = [];
  for (const body of bodies) {
    const { data, response } = await ws.api.POST('/contacts', { body });
    expect(response.status).toBe(201);
    contacts.push(data!);
  }
  return contacts;
}

/** `count` contacts without phone or e-mail, named in creation order. */
const numbered = (count: number): ContactCreate[] => Array.from({ length: count }, (_, i) => ({ name: `Contato ${String(i + 1).padStart(3, '0')}` }));

async function storedContacts(workspaceId: string) {
  return server.db.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute();
}

/** Sets a row's created_at, which the API never changes: how a test arranges equal timestamps. */
async function backdate(id: string, createdAt: Date): Promise<void> {
  await sql`update contacts set created_at = ${createdAt} where id = ${id}`.execute(server.db);
}

const validationError = (path: string, message: string) => ({
  error: { code: 'validation_error', message: 'The request does not match the contract.', details: [{ path, message }], requestId: expect.any(String) },
});

describe('POST /contacts', () => {
  it('when name, phone and email are given, then it answers 201 with the contact and stores it', async () => {
    const { api, workspaceId } = await createWorkspace(server);
    const body = buildContact();

    const { data, response } = await api.POST('/contacts', { body });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      name: body.name,
      phone: body.phone,
      email: body.email,
      instagramId: null,
      whatsappUserId: null,
      whatsappUsername: null,
      externalId: null,
      labels: [],
      attributes: {},
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    expect(await storedContacts(workspaceId)).toEqual([
      {
        workspace_id: workspaceId,
        id: data!.id,
        name: body.name,
        phone: body.phone,
        email: body.email,
        instagram_id: null,
        labels: [],
        label_keys: [],
        attributes: {},
        created_at: new Date(data!.createdAt),
        updated_at: new Date(data!.updatedAt),
        erased_at: null,
        whatsapp_user_id: null,
        whatsapp_username: null,
        external_id: null,
        merged_into: null,
      },
    ]);
  });

  it('when only a name is given, then phone and email are null', async () => {
    const { api, workspaceId } = await createWorkspace(server);

    const { data, response } = await api.POST('/contacts', { body: { name: 'João Pereira' } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      name: 'João Pereira',
      phone: null,
      email: null,
      instagramId: null,
      whatsappUserId: null,
      whatsappUsername: null,
      externalId: null,
      labels: [],
      attributes: {},
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    const rows = await storedContacts(workspaceId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: data!.id, name: 'João Pereira', phone: null, email: null });
  });

  it('when two contacts have no phone, then both are created (only a phone is unique)', async () => {
    const ws = await createWorkspace(server);

    const [first, second] = await createContacts(ws, [{ name: 'Sem Telefone 1' }, { name: 'Sem Telefone 2' }]);

    expect(second!.id).not.toBe(first!.id);
    expect((await storedContacts(ws.workspaceId)).map((r) => [r.id, r.phone])).toEqual([
      [first!.id, null],
      [second!.id, null],
    ]);
  });

  it.each([
    ['the shortest E.164 number (8 digits)', '+12345678'],
    ['the longest E.164 number (15 digits)', '+551198765432101'],
  ])('when the phone is %s, then it is accepted', async (_label, phone) => {
    const { api, workspaceId } = await createWorkspace(server);

    const { data, response } = await api.POST('/contacts', { body: { name: 'Limite', phone } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      name: 'Limite',
      phone,
      email: null,
      instagramId: null,
      whatsappUserId: null,
      whatsappUsername: null,
      externalId: null,
      labels: [],
      attributes: {},
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    expect((await storedContacts(workspaceId)).map((r) => r.phone)).toEqual([phone]);
  });

  it.each([
    ['has no leading +', '5511987654321'],
    ['starts with country code 0', '+0511987654321'],
    ['is too short', '+1234567'],
    ['is too long', '+5511987654321012'],
    ['has spaces and a dash', '+55 11 98765-4321'],
    ['has a letter', '+55119876a4321'],
    ['is empty', ''],
  ])('when the phone %s, then it answers 400 validation_error and stores nothing', async (_label, phone) => {
    const { api, workspaceId } = await createWorkspace(server);

    const { error, response } = await api.POST('/contacts', { body: { name: 'Mariana Silva', phone } });

    expect(response.status).toBe(400);
    expect(error).toEqual(validationError('/body/phone', 'must match pattern "^\\+[1-9]\\d{7,14}$", e.g. +5511987654321'));
    expect(await storedContacts(workspaceId)).toEqual([]);
  });

  it.each(['not-an-email', 'mariana@', '@exemplo.com.br', 'mariana silva@exemplo.com.br', 'mariana@exemplo', 'mariana@@exemplo.com'])(
    'when the email is %j, then it answers 400 validation_error and stores nothing',
    async (email) => {
      const { api, workspaceId } = await createWorkspace(server);

      const { error, response } = await api.POST('/contacts', { body: { name: 'Mariana Silva', email } });

      expect(response.status).toBe(400);
      expect(error).toEqual(validationError('/body/email', 'must match format "email"'));
      expect(await storedContacts(workspaceId)).toEqual([]);
    },
  );

  it('when the name is missing, then it answers 400 validation_error and stores nothing', async () => {
    const { workspaceId, apiKey } = await createWorkspace(server);

    const response = await request(server, 'POST', '/v1/contacts', { apiKey, body: { phone: buildPhone() } });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationError('/body/name', "must have required property 'name'"));
    expect(await storedContacts(workspaceId)).toEqual([]);
  });

  it('when another contact of the workspace has the phone, then it answers 409 conflict naming it and stores nothing', async () => {
    const ws = await createWorkspace(server);
    const phone = buildPhone();
    const [existing] = await createContacts(ws, [buildContact({ phone })]);
    const before = await storedContacts(ws.workspaceId);

    const { error, response } = await ws.api.POST('/contacts', { body: buildContact({ name: 'Outra Pessoa', phone, email: 'outra@exemplo.com' }) });

    expect(response.status).toBe(409);
    expect(error).toEqual({
      error: {
        code: 'conflict',
        message: 'A contact with this phone already exists.',
        details: [{ path: '/body/phone', message: `already used by contact ${existing!.id}`, existingId: existing!.id }],
        requestId: expect.any(String),
      },
    });
    expect(await storedContacts(ws.workspaceId)).toEqual(before);
  });

  it('when a contact of another workspace has the phone, then it is created in this one', async () => {
    const other = await createWorkspace(server);
    const phone = buildPhone();
    const [foreign] = await createContacts(other, [buildContact({ phone })]);
    const { api, workspaceId } = await createWorkspace(server);

    const { data, response } = await api.POST('/contacts', { body: buildContact({ phone }) });

    expect(response.status).toBe(201);
    expect(data).toEqual({ ...foreign, id: expect.stringMatching(UUID), createdAt: expect.stringMatching(ISO_MS), updatedAt: data!.createdAt });
    expect(data!.id).not.toBe(foreign!.id);
    expect((await storedContacts(workspaceId)).map((r) => [r.id, r.phone])).toEqual([[data!.id, phone]]);
    expect((await storedContacts(other.workspaceId)).map((r) => [r.id, r.phone])).toEqual([[foreign!.id, phone]]);
  });
});

describe('GET /contacts/{id}', () => {
  it('when the contact exists, then it answers 200 with the contact', async () => {
    const ws = await createWorkspace(server);
    const [created] = await createContacts(ws, [buildContact()]);

    const { data, response } = await ws.api.GET('/contacts/{id}', { params: { path: { id: created!.id } } });

    expect(response.status).toBe(200);
    expect(data).toEqual(created);
  });

  it('when no contact has the id, then it answers 404 not_found', async () => {
    const { api } = await createWorkspace(server);

    const { error, response } = await api.GET('/contacts/{id}', { params: { path: { id: MISSING_ID } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(CONTACT_NOT_FOUND);
  });

  it('when the contact belongs to another workspace, then it answers 404 not_found', async () => {
    const other = await createWorkspace(server);
    const [foreign] = await createContacts(other, [buildContact()]);
    const { api } = await createWorkspace(server);

    const { error, response } = await api.GET('/contacts/{id}', { params: { path: { id: foreign!.id } } });

    expect(response.status).toBe(404);
    expect(error).toEqual(CONTACT_NOT_FOUND);
  });
});

describe('GET /contacts', () => {
  it('when there are no filters, then it lists the workspace contacts oldest first', async () => {
    const ws = await createWorkspace(server);
    const contacts = await createContacts(ws, [buildContact(), { name: 'João Pereira' }, buildContact({ name: 'Ana Souza' })]);
    await createContacts(await createWorkspace(server), [buildContact()]);

    const { data, response } = await ws.api.GET('/contacts');

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: contacts, pagination: { total: 3, page: 1, limit: 20 } });
  });

  it('when contacts share a createdAt, then they are ordered by createdAt and then by id', async () => {
    const ws = await createWorkspace(server);
    const [a, b, c] = await createContacts(ws, numbered(3));
    const tied = new Date('2026-02-01T08:00:00.000Z');
    const later = new Date('2026-02-01T08:00:00.001Z');
    for (const contact of [c!, b!]) await backdate(contact.id, tied);
    await backdate(a!.id, later);

    const { data } = await ws.api.GET('/contacts');

    expect(data).toEqual({
      data: [
        { ...b, createdAt: tied.toISOString() },
        { ...c, createdAt: tied.toISOString() },
        { ...a, createdAt: later.toISOString() },
      ],
      pagination: { total: 3, page: 1, limit: 20 },
    });
  });

  it('when q is part of a name in another case, then it lists the contacts whose name contains it', async () => {
    const ws = await createWorkspace(server);
    const [mariana, , silvana] = await createContacts(ws, [{ name: 'Mariana Silva' }, { name: 'João Pereira' }, { name: 'SILVANA Costa' }]);

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { q: 'sIlVa' } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [mariana, silvana], pagination: { total: 2, page: 1, limit: 20 } });
  });

  it('when q has accented letters in another case, then it still matches', async () => {
    const ws = await createWorkspace(server);
    const [joao] = await createContacts(ws, [{ name: 'JOÃO ÉLIO' }, { name: 'Joao Elio' }]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'joão élio' } } });

    expect(data).toEqual({ data: [joao], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when q is typed decomposed (NFD), then it finds the name kept composed, as it finds it typed composed', async () => {
    const ws = await createWorkspace(server);
    const [jose] = await createContacts(ws, [{ name: 'José Antônio' }, { name: 'Jose Antonio' }]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'José Antônio'.normalize('NFD') } } });

    expect(data).toEqual({ data: [jose], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when q is part of a phone, then it lists the contacts whose phone contains it', async () => {
    const ws = await createWorkspace(server);
    const [match] = await createContacts(ws, [
      { name: 'Com Telefone', phone: '+5511987650001' },
      { name: 'Outro Telefone', phone: '+5521912340002' },
      { name: 'Sem Telefone' },
    ]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: '1198765' } } });

    expect(data).toEqual({ data: [match], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when q is part of an e-mail in another case, then it lists the contacts whose e-mail contains it', async () => {
    const ws = await createWorkspace(server);
    const [first, , third] = await createContacts(ws, [
      { name: 'Primeira', email: 'primeira@Loja-Azul.com.br' },
      { name: 'Segunda', email: 'segunda@loja-verde.com.br' },
      { name: 'Terceira', email: 'terceira@loja-azul.com.br' },
      { name: 'Sem E-mail' },
    ]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'LOJA-AZUL' } } });

    expect(data).toEqual({ data: [first, third], pagination: { total: 2, page: 1, limit: 20 } });
  });

  it.each([
    ['%', '100% Silva', ['1000 Silva', 'Silva']],
    ['0%', '100% Silva', ['1000 Silva', '10 Silva']],
    ['_', 'ana_souza', ['anasouza', 'Ana Souza']],
    ['a_s', 'ana_souza', ['anaxsouza', 'Ana Souza']],
    ['\\', 'Loja A\\B', ['Loja AB', 'Loja A/B']],
  ])('when q is %j, then it is matched literally, not as a pattern', async (q, literal, others) => {
    const ws = await createWorkspace(server);
    const contacts = await createContacts(
      ws,
      [literal, ...others].map((name) => ({ name })),
    );

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { q } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [contacts[0]], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when q matches nothing, then it answers an empty page with total 0', async () => {
    const ws = await createWorkspace(server);
    await createContacts(ws, [buildContact()]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'ninguém' } } });

    expect(data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  // A space as "+" is how URLSearchParams, HTML forms and Python requests encode a query.
  it('when q is form-encoded (a space as +), then it matches like the %20 form does', async () => {
    const ws = await createWorkspace(server);
    const [mariana] = await createContacts(ws, [{ name: 'Mariana Silva' }, { name: 'Silva Mariana' }]);

    const response = await request(server, 'GET', `/v1/contacts?${new URLSearchParams({ q: 'mariana silva' }).toString()}`, { apiKey: ws.apiKey });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: [mariana], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when filtered by phone, then it lists only the contact with exactly that phone', async () => {
    const ws = await createWorkspace(server);
    const [, match] = await createContacts(ws, [
      { name: 'Prefixo', phone: '+551198765432' },
      { name: 'Exato', phone: '+5511987654321' },
      { name: 'Sufixo', phone: '+55119876543210' },
    ]);
    await createContacts(await createWorkspace(server), [{ name: 'Outro Workspace', phone: '+5511987654321' }]);

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { phone: '+5511987654321' } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [match], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when filtered by a phone nobody has, then it answers an empty page', async () => {
    const ws = await createWorkspace(server);
    await createContacts(ws, [buildContact()]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { phone: '+5511900000000' } } });

    expect(data).toEqual({ data: [], pagination: { total: 0, page: 1, limit: 20 } });
  });

  it('when filtered by e-mail in another case, then it lists the contacts with exactly that e-mail', async () => {
    const ws = await createWorkspace(server);
    const [match, , alsoMatch] = await createContacts(ws, [
      { name: 'Mariana', email: 'Mariana.Silva@Exemplo.com.br' },
      { name: 'Parecida', email: 'xmariana.silva@exemplo.com.br' },
      { name: 'Homônima', email: 'mariana.silva@exemplo.com.br' },
    ]);

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { email: 'MARIANA.SILVA@EXEMPLO.COM.BR' } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [match, alsoMatch], pagination: { total: 2, page: 1, limit: 20 } });
  });

  // An "@" is allowed unencoded in a query (RFC 3986 §3.4); axios and curl users send it that way.
  it('when the e-mail filter carries an unencoded @, then it filters like the %40 form does', async () => {
    const ws = await createWorkspace(server);
    const [match] = await createContacts(ws, [{ name: 'Mariana', email: 'mariana@exemplo.com.br' }, { name: 'Outra' }]);

    const response = await request(server, 'GET', '/v1/contacts?email=mariana@exemplo.com.br', { apiKey: ws.apiKey });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: [match], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when q and email are combined, then a contact must match both', async () => {
    const ws = await createWorkspace(server);
    const [match] = await createContacts(ws, [
      { name: 'Mariana Silva', email: 'contato@exemplo.com' },
      { name: 'Mariana Souza', email: 'outro@exemplo.com' },
      { name: 'Pedro Silva', email: 'contato2@exemplo.com' },
    ]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'silva', email: 'contato@exemplo.com' } } });

    expect(data).toEqual({ data: [match], pagination: { total: 1, page: 1, limit: 20 } });
  });

  it('when page 2 of 3 is asked for, then it answers the middle records in stable order', async () => {
    const ws = await createWorkspace(server);
    const contacts = await createContacts(ws, numbered(8));

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { page: 2, limit: 3 } } });
    const last = await ws.api.GET('/contacts', { params: { query: { page: 3, limit: 3 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: contacts.slice(3, 6), pagination: { total: 8, page: 2, limit: 3 } });
    expect(last.data).toEqual({ data: contacts.slice(6), pagination: { total: 8, page: 3, limit: 3 } });
  });

  it('when the page is past the last one, then data is empty and total is exact', async () => {
    const ws = await createWorkspace(server);
    await createContacts(ws, numbered(4));

    const { data, response } = await ws.api.GET('/contacts', { params: { query: { page: 3, limit: 2 } } });
    const far = await ws.api.GET('/contacts', { params: { query: { page: 1_000_000, limit: 100 } } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ data: [], pagination: { total: 4, page: 3, limit: 2 } });
    expect(far.data).toEqual({ data: [], pagination: { total: 4, page: 1_000_000, limit: 100 } });
  });

  it('when the page is past the last one of a q filter, then total counts only the matches', async () => {
    const ws = await createWorkspace(server);
    await createContacts(ws, [{ name: 'Ana Silva' }, { name: 'Bruno Silva' }, { name: 'Carla Souza' }]);

    const { data } = await ws.api.GET('/contacts', { params: { query: { q: 'silva', page: 2, limit: 2 } } });

    expect(data).toEqual({ data: [], pagination: { total: 2, page: 2, limit: 2 } });
  });

  it('when limit is 1, then each page holds exactly one contact, in order', async () => {
    const ws = await createWorkspace(server);
    const contacts = await createContacts(ws, numbered(3));

    const pages = [];
    for (const page of [1, 2, 3]) pages.push((await ws.api.GET('/contacts', { params: { query: { page, limit: 1 } } })).data);

    expect(pages).toEqual(contacts.map((contact, i) => ({ data: [contact], pagination: { total: 3, page: i + 1, limit: 1 } })));
  });

  it('when limit is 100 and there are 101 contacts, then page 1 holds 100 and page 2 the last one', async () => {
    const ws = await createWorkspace(server);
    const contacts = await createContacts(ws, numbered(101));

    const first = await ws.api.GET('/contacts', { params: { query: { limit: 100 } } });
    const second = await ws.api.GET('/contacts', { params: { query: { page: 2, limit: 100 } } });

    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({ data: contacts.slice(0, 100), pagination: { total: 101, page: 1, limit: 100 } });
    expect(second.data).toEqual({ data: contacts.slice(100), pagination: { total: 101, page: 2, limit: 100 } });
  });
});

describe('PUT /contacts/{id}', () => {
  it.each(['PUT'])('when the method is %s, then it answers 405 method_not_allowed and changes nothing', async (method) => {
    const ws = await createWorkspace(server);
    const [contact] = await createContacts(ws, [buildContact()]);
    const before = await storedContacts(ws.workspaceId);

    const response = await request(server, method, `/v1/contacts/${contact!.id}`, {
      apiKey: ws.apiKey,
      body: { name: 'Outro Nome' },
    });

    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, PATCH, DELETE');
    expect(response.body).toEqual({
      error: { code: 'method_not_allowed', message: `${method} is not allowed on this path; use GET, PATCH, DELETE.`, requestId: expect.any(String) },
    });
    expect(await storedContacts(ws.workspaceId)).toEqual(before);
  });
});
