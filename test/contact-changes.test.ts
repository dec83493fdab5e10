// Correcting a contact (PATCH /contacts/{id}: a phone stays unique, also under a race) and erasing
// one at the person's request (DELETE /contacts/{id}, LGPD art. 18): gone for every read and
// reference, no personal data left in any row, and every statistic the same as before.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, buildContact, buildPhone, createWorkspace, ISO_MS, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Contact = components['schemas']['Contact'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function createContact(ws: TestWorkspace, overrides: Partial<components['schemas']['ContactCreate']> = {}): Promise<Contact> {
  const { data, response } = await ws.api.POST('/contacts', { body: buildContact(overrides) });
  expect(response.status).toBe(201);
  return data!;
}

const update = (ws: TestWorkspace, id: string, body: components['schemas']['ContactUpdate']) =>
  ws.api.PATCH('/contacts/{id}', { params: { path: { id } }, body });

describe('PATCH /contacts/{id}', () => {
  it('when the name, phone and email are corrected, then it answers the contact with them and a later updatedAt', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws);
    const phone = buildPhone();

    const { data, response } = await update(ws, contact.id, { name: 'Mariana Souza Silva', phone, email: 'mariana.souza@exemplo.com.br' });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...contact, name: 'Mariana Souza Silva', phone, email: 'mariana.souza@exemplo.com.br', updatedAt: expect.stringMatching(ISO_MS) });
    expect(data!.updatedAt >= contact.updatedAt).toBe(true);
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(data);
    expect((await ws.api.GET('/contacts', { params: { query: { phone } } })).data!.data).toEqual([data]);
  });

  it('when phone and email are null, then both are removed and the old phone is free again', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws);

    const { data } = await update(ws, contact.id, { phone: null, email: null });

    expect(data).toMatchObject({ name: contact.name, phone: null, email: null });
    expect((await ws.api.POST('/contacts', { body: buildContact({ phone: contact.phone! }) })).response.status).toBe(201);
  });

  it('when the phone is another contact’s, then 409 naming that contact, and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const holder = await createContact(ws);
    const contact = await createContact(ws);

    const { error, response } = await update(ws, contact.id, { name: 'Outro', phone: holder.phone! });

    expect(response.status).toBe(409);
    expect(error).toEqual({
      error: {
        requestId: expect.any(String),
        code: 'conflict',
        message: 'A contact with this phone already exists.',
        details: [{ path: '/body/phone', message: `already used by contact ${holder.id}`, existingId: holder.id }],
      },
    });
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } })).data).toEqual(contact);
  });

  it('when the phone is its own, then it is no clash', async () => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws);

    const { response } = await update(ws, contact.id, { phone: contact.phone! });

    expect(response.status).toBe(200);
  });

  it('when another workspace has the phone, then it is no clash', async () => {
    const ws = await createWorkspace(server);
    const theirs = await createContact(await createWorkspace(server));
    const contact = await createContact(ws);

    const { data, response } = await update(ws, contact.id, { phone: theirs.phone! });

    expect(response.status).toBe(200);
    expect(data!.phone).toBe(theirs.phone);
  });

  it('when eight contacts take the same new phone at once, with a create racing too, then exactly one gets it and the others answer 409', async () => {
    const ws = await createWorkspace(server);
    const contacts = await Promise.all(Array.from({ length: 8 }, () => createContact(ws)));
    const phone = buildPhone();

    const results = await Promise.all([...contacts.map((c) => update(ws, c.id, { phone })), ws.api.POST('/contacts', { body: buildContact({ phone }) })]);

    const statuses = results.map((r) => r.response.status);
    expect(statuses.filter((s) => s === 409)).toHaveLength(8);
    expect(statuses.filter((s) => s === 200 || s === 201)).toHaveLength(1);
    const { data } = await ws.api.GET('/contacts', { params: { query: { phone } } });
    expect(data!.pagination.total).toBe(1);
    for (const result of results.filter((r) => r.response.status === 409)) {
      expect(result.error!.error.details![0]!.existingId).toBe(data!.data[0]!.id);
    }
  });

  it.each([
    ['unknown', async () => randomUUID()],
    ['of another workspace', async () => (await createContact(await createWorkspace(server))).id],
  ])('when the contact is %s, then 404 not_found', async (_, id) => {
    const ws = await createWorkspace(server);

    const { error, response } = await update(ws, await id(), { name: 'X' });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'not_found', message: 'Contact not found.' } });
  });

  it.each([
    ['the body is empty', {}, '/body'],
    ['the name is null', { name: null }, '/body/name'],
    ['the phone is not E.164', { phone: '11987654321' }, '/body/phone'],
    ['the email is not an address', { email: 'mariana' }, '/body/email'],
  ])('when %s, then 400 validation_error on it', async (_, body, path) => {
    const ws = await createWorkspace(server);
    const contact = await createContact(ws);

    const res = await request(server, 'PATCH', `/v1/contacts/${contact.id}`, { apiKey: ws.apiKey, body });

    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
  });
});

describe('DELETE /contacts/{id}', () => {
  const WINDOW = { dateFrom: '2000-01-01T00:00:00Z', dateTo: '2100-01-01T00:00:00Z' };

  /** A workspace where the person has two threads (one answered NPS, one moved and closed) with messages, beside another contact. */
  async function arrange() {
    const ws = await createWorkspace(server);
    const person = await createContact(ws, { name: 'Joana Pessoa Apagável', email: 'joana.apagavel@exemplo.com.br' });
    const other = await createContact(ws, { name: 'Carlos Permanece' });
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });
    const [whatsapp, instagram] = [ws.channels[0]!.id, ws.channels[1]!.id];
    const send = async (contactId: string, channelId: string, content: string) =>
      (await ws.api.POST('/messages', { body: { contactId, channelId, content } })).data!;
    const first = await send(person.id, whatsapp, 'Meu CPF é 123.456.789-00, endereço Rua das Flores 42');
    await send(person.id, whatsapp, 'Obrigada!');
    const second = await send(person.id, instagram, 'Oi, sou a Joana');
    const kept = await send(other.id, whatsapp, 'Mensagem do Carlos');
    const { data: stages } = await ws.api.GET('/stages');
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: first.threadId } }, body: { stageId: stages!.data[1]!.id, agentId: agent!.id } });
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: first.threadId } }, body: { score: 9 } });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: second.threadId } }, body: { stageId: stages!.data[3]!.id, status: 'closed' } });
    await ws.api.POST('/threads/{id}/nps', { params: { path: { id: kept.threadId } }, body: { score: 3 } });
    return { ws, person, other, threadIds: [first.threadId, second.threadId], kept };
  }

  /** Every statistic the API answers for the workspace. */
  async function statistics(ws: TestWorkspace) {
    const nps = async (groupBy?: 'channel' | 'agent' | 'stage' | 'day') =>
      (await ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: ws.workspaceId, ...WINDOW, ...(groupBy && { groupBy }) } } })).data;
    return {
      funnel: (await ws.api.GET('/threads/stats/funnel', { params: { query: WINDOW } })).data,
      nps: [await nps(), await nps('channel'), await nps('agent'), await nps('stage'), await nps('day')],
      threads: (await ws.api.GET('/threads', { params: { query: { limit: 100 } } })).data,
    };
  }

  /** Every row the workspace holds in the tables that can carry a person's data, as text. */
  async function storedText(workspaceId: string): Promise<string> {
    const tables = ['contacts', 'messages', 'threads', 'thread_history', 'nps_daily', 'nps_daily_groups', 'stages', 'channels', 'agents'] as const;
    const rows = await Promise.all(tables.map((table) => server.db.selectFrom(table).selectAll().where('workspace_id', '=', workspaceId).execute()));
    return JSON.stringify(rows);
  }

  it('when the person is erased, then it answers 204 and the contact is gone for every read, change and reference', async () => {
    const { ws, person, other } = await arrange();

    const { response } = await ws.api.DELETE('/contacts/{id}', { params: { path: { id: person.id } } });

    expect(response.status).toBe(204);
    const notFound = { error: { requestId: expect.any(String), code: 'not_found', message: 'Contact not found.' } };
    expect((await ws.api.GET('/contacts/{id}', { params: { path: { id: person.id } } })).error).toEqual(notFound);
    expect((await update(ws, person.id, { name: 'De volta' })).error).toEqual(notFound);
    expect((await ws.api.DELETE('/contacts/{id}', { params: { path: { id: person.id } } })).error).toEqual(notFound);
    expect((await ws.api.GET('/contacts')).data).toEqual({ data: [other], pagination: { total: 1, page: 1, limit: 20 } });
    expect((await ws.api.GET('/contacts', { params: { query: { phone: person.phone! } } })).data!.data).toEqual([]);
    const invalid = {
      error: {
        requestId: expect.any(String),
        code: 'invalid_reference',
        message: 'The contact does not exist.',
        details: [{ path: '/body/contactId', message: 'no contact with this id' }],
      },
    };
    for (const channelId of [ws.channels[0]!.id, ws.channels[1]!.id]) {
      // The person's WhatsApp thread is still open: a message must not slip into it.
      const message = await ws.api.POST('/messages', { body: { contactId: person.id, channelId, content: 'Olá?' } });
      expect([message.response.status, message.error]).toEqual([422, invalid]);
      const thread = await ws.api.POST('/threads', { body: { contactId: person.id, channelId } });
      expect([thread.response.status, thread.error]).toEqual([422, invalid]);
    }
  });

  it('when the person is erased, then their messages keep no content and no row of the workspace holds their name, phone, email or words', async () => {
    const { ws, person, threadIds, kept } = await arrange();

    await ws.api.DELETE('/contacts/{id}', { params: { path: { id: person.id } } });

    for (const threadId of threadIds) {
      const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });
      expect(data!.data.length).toBeGreaterThan(0);
      expect(data!.data.every((m) => m.content === null && m.contactId === person.id)).toBe(true);
    }
    const { data: others } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: kept.threadId } } });
    expect(others!.data.map((m) => m.content)).toEqual(['Mensagem do Carlos']);
    const text = await storedText(ws.workspaceId);
    for (const personal of [person.name, person.phone!, person.email!, 'Joana', '123.456.789-00', 'Rua das Flores', 'Obrigada']) {
      expect(text, personal).not.toContain(personal);
    }
    expect(text).toContain('Carlos Permanece');
  });

  it('when the person is erased, then the funnel, the NPS statistics (every grouping) and the threads are the same as before', async () => {
    const { ws, person } = await arrange();
    const before = await statistics(ws);

    await ws.api.DELETE('/contacts/{id}', { params: { path: { id: person.id } } });

    expect(await statistics(ws)).toEqual(before);
    expect(before.nps[0]).toMatchObject({ total: 2 });
  });

  it('when the person is erased, then their phone can belong to a new contact', async () => {
    const { ws, person } = await arrange();
    await ws.api.DELETE('/contacts/{id}', { params: { path: { id: person.id } } });

    const { data, response } = await ws.api.POST('/contacts', { body: buildContact({ phone: person.phone! }) });

    expect(response.status).toBe(201);
    expect(data!.id).not.toBe(person.id);
  });

  it.each([
    ['unknown', async () => randomUUID()],
    ['of another workspace', async () => (await createContact(await createWorkspace(server))).id],
  ])('when the contact is %s, then 404 not_found and nothing is erased', async (_, id) => {
    const ws = await createWorkspace(server);
    const contactId = await id();

    const { error, response } = await ws.api.DELETE('/contacts/{id}', { params: { path: { id: contactId } } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'not_found', message: 'Contact not found.' } });
    const row = await server.db.selectFrom('contacts').select(['erased_at']).where('id', '=', contactId).executeTakeFirst();
    expect(row?.erased_at ?? null).toBeNull();
  });
});
