// Who the customer is (issue 35): WhatsApp business-scoped user ids (BSUID) and usernames in Meta's
// payloads, Brazil's ninth digit in every phone lookup, upsert by the integrator's keys, and merge
// in one transaction that holds against concurrent merges and customers' messages. Real PostgreSQL;
// Meta is the Graph double, its deliveries built as Meta's "Business-scoped user IDs" page documents them.
import { randomInt, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook, type MetaChannel } from './helpers/channels.js';
import { GraphDouble, whatsappBsuidText, whatsappDelivery, whatsappText, whatsappUserIdChange } from './helpers/graph.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

let graph: GraphDouble;
let server: TestServer;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  graph = await GraphDouble.start();
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { metaGraphUrl: graph.url, retryBaseMs: 20, jobPollMs: 100 } });
});
afterAll(async () => {
  await server.close();
  await graph.close();
  await own?.drop();
});

/** A Brazilian mobile of São Paulo in its two forms: 13 digits (`+5511 9 8XXXXXXX`) and the 12 WhatsApp still reports. */
function brazilianMobile(): { full: string; short: string } {
  const subscriber = `8${String(randomInt(1e7)).padStart(7, '0')}`;
  return { full: `+55119${subscriber}`, short: `+5511${subscriber}` };
}
const bsuid = (): string => `BR.${randomInt(1e9)}${randomInt(1e9)}`;

const contactsOf = (workspaceId: string) =>
  server.db.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
const messagesOf = (workspaceId: string) => server.db.selectFrom('messages').selectAll().where('workspace_id', '=', workspaceId).execute();
const eventsOf = (workspaceId: string, type: string) =>
  server.db.selectFrom('events').selectAll().where('workspace_id', '=', workspaceId).where('type', '=', type).orderBy('created_at').execute();

async function whatsappChannel(): Promise<{ ws: TestWorkspace; meta: MetaChannel }> {
  const ws = await createWorkspace(server);
  return { ws, meta: await createMetaChannel(ws, 'whatsapp') };
}

async function deliver(meta: MetaChannel, value: { messages?: unknown[]; contacts?: unknown[] }): Promise<void> {
  const res = await postWebhook(server, meta.channel.id, whatsappDelivery(meta.externalId, value), { appSecret: meta.appSecret });
  expect(res.status).toBe(200);
}

describe('phones: the Brazilian ninth digit', () => {
  it('when a mobile is created in its 12-digit form, then it is stored in its 13-digit form and either form is a 409 after', async () => {
    const { ws } = await whatsappChannel();
    const phone = brazilianMobile();

    const created = await ws.api.POST('/contacts', { body: { name: 'Mariana', phone: phone.short } });
    const again = await ws.api.POST('/contacts', { body: { name: 'Mariana de novo', phone: phone.full } });

    expect(created.response.status).toBe(201);
    expect(created.data!.phone).toBe(phone.full);
    expect(again.response.status).toBe(409);
    expect(again.error!.error.details).toEqual([{ path: '/body/phone', message: `already used by contact ${created.data!.id}`, existingId: created.data!.id }]);
    expect(await contactsOf(ws.workspaceId)).toHaveLength(1);
  });

  it('when a phone is written with a trunk 0 after the country code, then it is stored in E.164 without it, unless that would leave it shorter than a phone (kept as given)', async () => {
    const { ws } = await whatsappChannel();
    const london = `+440207${String(randomInt(1e7)).padStart(7, '0')}`;
    const short = `+640${String(randomInt(1e5)).padStart(5, '0')}`;

    const uk = await ws.api.POST('/contacts', { body: { name: 'Londres', phone: london } });
    const nz = await ws.api.POST('/contacts', { body: { name: 'Curto', phone: short } });

    expect(uk.data!.phone).toBe(`+44${london.slice(4)}`);
    expect(nz.response.status).toBe(201);
    expect(nz.data!.phone).toBe(short);
  });

  it('when a landline (8 digits starting 2-5) is stored, then it never gains a 9 and its 13-digit look-alike is another number', async () => {
    const { ws } = await whatsappChannel();
    const landline = `+55113${String(randomInt(1e7)).padStart(7, '0')}`;

    const created = await ws.api.POST('/contacts', { body: { name: 'Loja', phone: landline } });
    const other = await ws.api.POST('/contacts', { body: { name: 'Outro', phone: `+55119${landline.slice(5)}` } });

    expect(created.data!.phone).toBe(landline);
    expect(other.response.status).toBe(201);
  });

  it('when ?phone= names either form, then it finds the contact, a contact from before stored in the 12-digit form too', async () => {
    const { ws } = await whatsappChannel();
    const phone = brazilianMobile();
    const legacy = brazilianMobile();
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Mariana', phone: phone.full } });
    // As migration 0027 leaves it: a phone stored before, as it was written.
    await server.db
      .insertInto('contacts')
      .values({
        workspace_id: ws.workspaceId,
        id: randomUUID(),
        name: 'Antigo',
        phone: legacy.short,
        email: null,
        created_at: new Date(),
        updated_at: new Date(),
      })
      .execute();

    const byShort = await ws.api.GET('/contacts', { params: { query: { phone: phone.short } } });
    const byFull = await ws.api.GET('/contacts', { params: { query: { phone: phone.full } } });
    const legacyByFull = await ws.api.GET('/contacts', { params: { query: { phone: legacy.full } } });

    expect(byShort.data!.data.map((c) => c.id)).toEqual([contact!.id]);
    expect(byFull.data!.data.map((c) => c.id)).toEqual([contact!.id]);
    expect(legacyByFull.data!.data.map((c) => c.name)).toEqual(['Antigo']);
  });
});

describe('inbound WhatsApp: BSUID, then phone', () => {
  it('when a customer with a username and no phone writes, then the message is stored on a contact known by the BSUID and named after the profile', async () => {
    const { ws, meta } = await whatsappChannel();
    const userId = bsuid();

    await deliver(meta, whatsappBsuidText({ userId, username: 'mariana.silva', name: 'Mariana Silva' }, 'Oi, sem telefone'));

    const contacts = await contactsOf(ws.workspaceId);
    expect(contacts).toHaveLength(1);
    expect(contacts[0]).toMatchObject({ name: 'Mariana Silva', phone: null, whatsapp_user_id: userId, whatsapp_username: 'mariana.silva' });
    const messages = await messagesOf(ws.workspaceId);
    expect(messages.map((m) => [m.contact_id, m.content])).toEqual([[contacts[0]!.id, 'Oi, sem telefone']]);
    const byBsuid = await ws.api.GET('/contacts', { params: { query: { whatsappUserId: userId } } });
    expect(byBsuid.data!.data.map((c) => c.id)).toEqual([contacts[0]!.id]);
  });

  it('when neither profile name nor phone comes, then the username names the contact; with no username, the BSUID', async () => {
    const { ws, meta } = await whatsappChannel();
    const [a, b] = [bsuid(), bsuid()];

    await deliver(meta, whatsappBsuidText({ userId: a, username: 'so.username' }, 'um'));
    await deliver(meta, whatsappBsuidText({ userId: b }, 'dois'));

    expect((await contactsOf(ws.workspaceId)).map((c) => c.name).sort()).toEqual([b, 'so.username'].sort());
  });

  it('when the BSUID first comes alone and later with the phone, then one contact holds both and the username is refreshed', async () => {
    const { ws, meta } = await whatsappChannel();
    const userId = bsuid();
    const phone = brazilianMobile();

    await deliver(meta, whatsappBsuidText({ userId, username: 'antes' }, 'primeira'));
    await deliver(meta, whatsappBsuidText({ userId, phone: phone.short.slice(1), username: 'depois' }, 'segunda'));

    const contacts = await contactsOf(ws.workspaceId);
    expect(contacts).toHaveLength(1);
    expect(contacts[0]).toMatchObject({ phone: phone.full, whatsapp_user_id: userId, whatsapp_username: 'depois' });
    expect(new Set((await messagesOf(ws.workspaceId)).map((m) => m.contact_id))).toEqual(new Set([contacts[0]!.id]));
  });

  it('when a later delivery profiles the customer without a username, then the username shown is cleared; a delivery without a profile leaves it', async () => {
    const { ws, meta } = await whatsappChannel();
    const userId = bsuid();
    await deliver(meta, whatsappBsuidText({ userId, username: 'joana2', name: 'Joana' }, 'primeira'));
    const noProfile = whatsappBsuidText({ userId }, 'segunda');
    noProfile.contacts = [];
    await deliver(meta, noProfile);
    expect((await contactsOf(ws.workspaceId))[0]).toMatchObject({ whatsapp_username: 'joana2' });

    await deliver(meta, whatsappBsuidText({ userId, name: 'Joana' }, 'terceira'));

    const [contact] = await contactsOf(ws.workspaceId);
    expect(contact).toMatchObject({ whatsapp_user_id: userId, whatsapp_username: null, name: 'Joana' });
    const { data: updated } = await ws.api.GET('/events', { params: { query: { type: 'contact.updated' } } });
    expect(updated!.data.map((e) => (e.data.object as { whatsappUsername: string | null }).whatsappUsername)).toEqual([null]);
  });

  it('when the integrator created the contact with the 13-digit phone and WhatsApp reports the 12-digit one, then the message lands on that contact', async () => {
    const { ws, meta } = await whatsappChannel();
    const phone = brazilianMobile();
    const userId = bsuid();
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Do CRM', phone: phone.full, externalId: 'crm-1' } });

    await deliver(meta, whatsappText(phone.short.slice(1), 'Oi', 'Mariana'));
    await deliver(meta, whatsappBsuidText({ userId, phone: phone.short.slice(1) }, 'De novo'));

    const contacts = await contactsOf(ws.workspaceId);
    expect(contacts.map((c) => [c.id, c.name, c.phone, c.whatsapp_user_id])).toEqual([[contact!.id, 'Do CRM', phone.full, userId]]);
    expect((await messagesOf(ws.workspaceId)).map((m) => m.contact_id)).toEqual([contact!.id, contact!.id]);
  });

  it('when the BSUID finds one contact and the phone is another one, then the phone stays where it is', async () => {
    const { ws, meta } = await whatsappChannel();
    const userId = bsuid();
    const phone = brazilianMobile();
    await deliver(meta, whatsappBsuidText({ userId }, 'pelo BSUID'));
    const { data: holder } = await ws.api.POST('/contacts', { body: { name: 'Dono do telefone', phone: phone.full } });

    await deliver(meta, whatsappBsuidText({ userId, phone: phone.full.slice(1) }, 'com telefone'));

    const contacts = await contactsOf(ws.workspaceId);
    const byBsuid = contacts.find((c) => c.whatsapp_user_id === userId)!;
    expect(byBsuid.phone).toBeNull();
    expect(contacts.find((c) => c.id === holder!.id)!.phone).toBe(phone.full);
    expect((await messagesOf(ws.workspaceId)).every((m) => m.contact_id === byBsuid.id)).toBe(true);
  });

  it('when the BSUID comes with a new phone, then the new phone replaces the old; when the phone comes with a new BSUID, then it replaces the old', async () => {
    const { ws, meta } = await whatsappChannel();
    const [userId, otherUserId] = [bsuid(), bsuid()];
    const [before, after] = [brazilianMobile(), brazilianMobile()];
    await deliver(meta, whatsappBsuidText({ userId, phone: before.full.slice(1) }, 'o número antigo'));

    await deliver(meta, whatsappBsuidText({ userId, phone: after.short.slice(1) }, 'o número novo'));
    const [moved] = await contactsOf(ws.workspaceId);
    await deliver(meta, whatsappBsuidText({ userId: otherUserId, phone: after.full.slice(1) }, 'outro BSUID'));

    const contacts = await contactsOf(ws.workspaceId);
    expect([moved!.phone, moved!.whatsapp_user_id]).toEqual([after.full, userId]);
    expect(contacts.map((c) => [c.id, c.phone, c.whatsapp_user_id])).toEqual([[moved!.id, after.full, otherUserId]]);
    expect(new Set((await messagesOf(ws.workspaceId)).map((m) => m.contact_id))).toEqual(new Set([moved!.id]));
    const updates = await ws.api.GET('/events', { params: { query: { type: 'contact.updated' } } });
    expect(updates.data!.data).toHaveLength(2);
  });

  it('when a new customer writes from a 12-digit mobile with no name, then the contact is named and stored in the 13-digit form', async () => {
    const { ws, meta } = await whatsappChannel();
    const phone = brazilianMobile();

    await deliver(meta, whatsappBsuidText({ userId: bsuid(), phone: phone.short.slice(1) }, 'sem nome'));

    const [contact] = await contactsOf(ws.workspaceId);
    expect([contact!.name, contact!.phone]).toEqual([phone.full, phone.full]);
  });

  it('when ?whatsappUsername= names a username in any case, then it lists the contacts Meta last delivered it for', async () => {
    const { ws, meta } = await whatsappChannel();
    await deliver(meta, whatsappBsuidText({ userId: bsuid(), username: 'Mariana.Silva' }, 'um'));
    await deliver(meta, whatsappBsuidText({ userId: bsuid(), username: 'outra.pessoa' }, 'dois'));

    const found = await ws.api.GET('/contacts', { params: { query: { whatsappUsername: 'mariana.SILVA' } } });
    const none = await ws.api.GET('/contacts', { params: { query: { whatsappUsername: 'ninguem' } } });
    const empty = await request(server, 'GET', '/v1/contacts?whatsappUsername=', { apiKey: ws.apiKey });

    expect(found.data!.data.map((c) => c.whatsappUsername)).toEqual(['Mariana.Silva']);
    expect(none.data!.data).toEqual([]);
    expect([empty.status, empty.body.error.details[0].path]).toEqual([400, '/query/whatsappUsername']);
  });

  it('when Meta says user_changed_user_id, then the contact moves to its new BSUID and the next message finds it', async () => {
    const { ws, meta } = await whatsappChannel();
    const [before, after] = [bsuid(), bsuid()];
    await deliver(meta, whatsappBsuidText({ userId: before, name: 'Mariana' }, 'antes'));

    await deliver(meta, whatsappUserIdChange(before, after));
    await deliver(meta, whatsappBsuidText({ userId: after }, 'depois'));

    const contacts = await contactsOf(ws.workspaceId);
    expect(contacts.map((c) => [c.name, c.whatsapp_user_id])).toEqual([['Mariana', after]]);
    expect((await messagesOf(ws.workspaceId)).map((m) => m.content).sort()).toEqual(['antes', 'depois']);
  });

  it('when a message has neither a phone nor a well-formed BSUID, then it is left out and nothing is stored', async () => {
    const { ws, meta } = await whatsappChannel();

    await deliver(meta, whatsappBsuidText({ userId: 'not-a-bsuid' }, 'perdida'));

    expect(await contactsOf(ws.workspaceId)).toEqual([]);
    expect(await messagesOf(ws.workspaceId)).toEqual([]);
  });
});

describe('outbound WhatsApp to a BSUID', () => {
  it("when the contact has only a BSUID, then Graph gets Meta's recipient field in place of to", async () => {
    const { ws, meta } = await whatsappChannel();
    const userId = bsuid();
    await deliver(meta, whatsappBsuidText({ userId }, 'Oi'));
    const contact = (await contactsOf(ws.workspaceId))[0]!;

    const sent = await ws.api.POST('/messages', { body: { contactId: contact.id, channelId: meta.channel.id, content: 'Olá!' } });

    expect(sent.response.status).toBe(201);
    await waitFor('the send', () => graph.to(meta.externalId).length > 0);
    const body = graph.to(meta.externalId)[0]!.body;
    expect(body).toMatchObject({ messaging_product: 'whatsapp', recipient: userId, type: 'text', text: { body: 'Olá!' } });
    expect(body).not.toHaveProperty('to');
  });

  it('when the contact has neither phone nor BSUID, then 422 contact_unreachable and nothing is queued, on a sandbox channel too', async () => {
    const { ws, meta } = await whatsappChannel();
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Sem contato' } });
    const sandbox = ws.channels.find((c) => c.type === 'whatsapp')!;

    for (const channelId of [meta.channel.id, sandbox.id]) {
      const { response, error } = await ws.api.POST('/messages', { body: { contactId: contact!.id, channelId, content: 'Olá' } });
      expect(response.status).toBe(422);
      expect(error!.error.code).toBe('contact_unreachable');
    }
    expect(await messagesOf(ws.workspaceId)).toEqual([]);
  });
});

describe('POST /contacts/upsert', () => {
  it('when no key finds a contact, then 201 and contact.created; again with the same key, 200 and contact.updated only when something changed', async () => {
    const { ws } = await whatsappChannel();
    const phone = brazilianMobile();

    const created = await ws.api.POST('/contacts/upsert', {
      body: { externalId: 'crm-42', name: 'Mariana', phone: phone.short, attributes: { plano: 'basico' } },
    });
    const updated = await ws.api.POST('/contacts/upsert', { body: { externalId: 'crm-42', attributes: { plano: 'premium', pedidos: 3 } } });
    const same = await ws.api.POST('/contacts/upsert', { body: { phone: phone.full, name: 'Mariana' } });

    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ externalId: 'crm-42', phone: phone.full, attributes: { plano: 'basico' } });
    expect(updated.response.status).toBe(200);
    expect(updated.data).toMatchObject({ id: created.data!.id, attributes: { plano: 'premium', pedidos: 3 } });
    expect(same.response.status).toBe(200);
    expect(same.data!.id).toBe(created.data!.id);
    expect(await eventsOf(ws.workspaceId, 'contact.created')).toHaveLength(1);
    expect(await eventsOf(ws.workspaceId, 'contact.updated')).toHaveLength(1);
  });

  it('when the email differs only in case, then it finds the contact', async () => {
    const { ws } = await whatsappChannel();
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Ana', email: 'Ana@Exemplo.com.br' } });

    const found = await ws.api.POST('/contacts/upsert', { body: { email: 'ana@exemplo.com.br', externalId: 'crm-ana' } });

    expect(found.response.status).toBe(200);
    expect(found.data).toMatchObject({ id: contact!.id, externalId: 'crm-ana' });
  });

  it.each([
    ['no key', { name: 'Sem chave' }, '/body'],
    ['no name for a new contact', { externalId: 'crm-novo' }, '/body/name'],
    ['a malformed BSUID', { whatsappUserId: 'br.123', name: 'X' }, '/body/whatsappUserId'],
    ['an externalId over 255 characters', { externalId: 'x'.repeat(256), name: 'X' }, '/body/externalId'],
  ])('when the body has %s, then 400 naming it and nothing is stored', async (_what, body, path) => {
    const { ws } = await whatsappChannel();

    const { response, error } = await ws.api.POST('/contacts/upsert', { body: body as never });

    expect(response.status).toBe(400);
    expect(error!.error.code).toBe('validation_error');
    expect(error!.error.details!.map((d) => d.path)).toContain(path);
    expect(await contactsOf(ws.workspaceId)).toEqual([]);
  });

  it('when the keys find two different contacts, then 409 naming both and nothing changes', async () => {
    const { ws } = await whatsappChannel();
    const phone = brazilianMobile();
    const { data: a } = await ws.api.POST('/contacts', { body: { name: 'A', externalId: 'crm-a' } });
    const { data: b } = await ws.api.POST('/contacts', { body: { name: 'B', phone: phone.full } });
    const before = await contactsOf(ws.workspaceId);

    const { response, error } = await ws.api.POST('/contacts/upsert', { body: { externalId: 'crm-a', phone: phone.short, name: 'Mudou' } });

    expect(response.status).toBe(409);
    expect(error!.error.code).toBe('conflict');
    expect(error!.error.details!.map((d) => [d.path, d.existingId])).toEqual(
      expect.arrayContaining([
        ['/body/externalId', a!.id],
        ['/body/phone', b!.id],
      ]),
    );
    expect(await contactsOf(ws.workspaceId)).toEqual(before);
  });

  it('when 10 upserts of one new externalId race, then one contact is created and the others find it', async () => {
    const { ws } = await whatsappChannel();

    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => ws.api.POST('/contacts/upsert', { body: { externalId: 'crm-race', name: 'Corrida', attributes: { n: i } } })),
    );

    expect(answers.map((a) => a.response.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.data!.id)).size).toBe(1);
    expect(await contactsOf(ws.workspaceId)).toHaveLength(1);
  });
});

describe('POST /contacts/{id}/merge', () => {
  async function twoContactsWithThreads() {
    const { ws, meta } = await whatsappChannel();
    const phone = brazilianMobile();
    const { data: target } = await ws.api.POST('/contacts', {
      body: { name: 'Mariana (CRM)', externalId: 'crm-7', labels: ['VIP'], attributes: { plano: 'premium' } },
    });
    // The customer writes with the phone the CRM does not have yet: a second contact, with its thread.
    await deliver(meta, whatsappText(phone.short.slice(1), 'Oi', 'Mariana'));
    await deliver(meta, whatsappText(phone.short.slice(1), 'Tudo bem?', 'Mariana'));
    const source = (await contactsOf(ws.workspaceId)).find((c) => c.id !== target!.id)!;
    await ws.api.PATCH('/contacts/{id}', { params: { path: { id: source.id } }, body: { labels: ['Boleto'], attributes: { plano: 'basico', cidade: 'SP' } } });
    // The target's own open thread on the same channel, older than the source's.
    await server.db
      .updateTable('threads')
      .set({ created_at: sql`now() + interval '1 minute'` })
      .where('workspace_id', '=', ws.workspaceId)
      .where('contact_id', '=', source.id)
      .execute();
    const { data: targetThread } = await ws.api.POST('/threads', { body: { contactId: target!.id, channelId: meta.channel.id } });
    return { ws, meta, phone, target: target!, source, targetThread: targetThread! };
  }

  it('when sources fold into the target, then it takes their null fields, labels and attributes, threads and messages, the older open thread closes, and the source answers contact_merged', async () => {
    const { ws, meta, phone, target, source, targetThread } = await twoContactsWithThreads();

    const { response, data } = await ws.api.POST('/contacts/{id}/merge', { params: { path: { id: target.id } }, body: { sourceIds: [source.id] } });

    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      id: target.id,
      name: 'Mariana (CRM)',
      phone: phone.full,
      externalId: 'crm-7',
      labels: ['VIP', 'Boleto'],
      attributes: { plano: 'premium', cidade: 'SP' },
    });
    const messages = await messagesOf(ws.workspaceId);
    expect(messages).toHaveLength(2);
    expect(messages.every((m) => m.contact_id === target.id)).toBe(true);
    const threads = await server.db.selectFrom('threads').selectAll().where('workspace_id', '=', ws.workspaceId).execute();
    expect(threads.every((t) => t.contact_id === target.id)).toBe(true);
    expect(threads.find((t) => t.id === targetThread.id)!.status).toBe('closed');
    expect(threads.filter((t) => t.status === 'open')).toHaveLength(1);
    const gone = await ws.api.GET('/contacts/{id}', { params: { path: { id: source.id } } });
    expect(gone.response.status).toBe(404);
    expect(gone.error!.error.code).toBe('contact_merged');
    expect(gone.error!.error.message).toContain(target.id);
    const [event] = await eventsOf(ws.workspaceId, 'contact.merged');
    expect(event).toMatchObject({ merged_ids: [source.id], data: { id: target.id } });
    const listed = await ws.api.GET('/events', { params: { query: { type: 'contact.merged' } } });
    expect(listed.data!.data[0]!.data).toMatchObject({ object: { id: target.id }, mergedIds: [source.id] });
    // The next message from the phone finds the target.
    await deliver(meta, whatsappText(phone.full.slice(1), 'Depois do merge'));
    expect((await messagesOf(ws.workspaceId)).every((m) => m.contact_id === target.id)).toBe(true);
  });

  it('when dryRun is true, then it answers what would move and close, and changes nothing', async () => {
    const { ws, target, source, targetThread } = await twoContactsWithThreads();
    const before = [await contactsOf(ws.workspaceId), await messagesOf(ws.workspaceId)];

    const { response, data } = await ws.api.POST('/contacts/{id}/merge', {
      params: { path: { id: target.id } },
      body: { sourceIds: [source.id], dryRun: true },
    });

    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      contact: { id: target.id, labels: ['VIP', 'Boleto'] },
      movedThreads: 1,
      movedMessages: 2,
      closedThreadIds: [targetThread.id],
    });
    expect([await contactsOf(ws.workspaceId), await messagesOf(ws.workspaceId)]).toEqual(before);
    expect(await eventsOf(ws.workspaceId, 'contact.merged')).toEqual([]);
  });

  it('when the body is bad or names contacts that are not there, then a clear 4xx and nothing changes', async () => {
    const { ws, target, source } = await twoContactsWithThreads();
    const other = await createWorkspace(server);
    const { data: foreign } = await other.api.POST('/contacts', { body: { name: 'De outro workspace' } });
    const { data: erased } = await ws.api.POST('/contacts', { body: { name: 'Apagado' } });
    await ws.api.DELETE('/contacts/{id}', { params: { path: { id: erased!.id } } });
    const before = await contactsOf(ws.workspaceId);
    const merge = (sourceIds: string[]) => ws.api.POST('/contacts/{id}/merge', { params: { path: { id: target.id } }, body: { sourceIds } });

    const tooMany = await merge(Array.from({ length: 51 }, () => randomUUID()));
    const itself = await merge([source.id, target.id]);
    const foreignOne = await merge([foreign!.id]);
    const erasedOne = await merge([erased!.id]);
    const unknown = await merge([randomUUID()]);

    expect([tooMany.response.status, tooMany.error!.error.details![0]!.path]).toEqual([400, '/body/sourceIds']);
    expect([itself.response.status, itself.error!.error.details![0]!.path]).toEqual([400, '/body/sourceIds/1']);
    expect([foreignOne.response.status, foreignOne.error!.error.code]).toEqual([404, 'not_found']);
    expect([erasedOne.response.status, erasedOne.error!.error.code]).toEqual([404, 'not_found']);
    expect([unknown.response.status, unknown.error!.error.code]).toEqual([404, 'not_found']);
    expect(await contactsOf(ws.workspaceId)).toEqual(before);
  });

  it('when two merges race over the same contacts, then every message ends on exactly one live contact', async () => {
    for (let round = 0; round < 5; round++) {
      const { ws, target, source } = await twoContactsWithThreads();

      const answers = await Promise.all([
        ws.api.POST('/contacts/{id}/merge', { params: { path: { id: target.id } }, body: { sourceIds: [source.id] } }),
        ws.api.POST('/contacts/{id}/merge', { params: { path: { id: source.id } }, body: { sourceIds: [target.id] } }),
      ]);

      const statuses = answers.map((a) => a.response.status).sort();
      expect(statuses).toEqual([200, 404]);
      expect(answers.find((a) => a.response.status === 404)!.error!.error.code).toBe('contact_merged');
      const live = (await contactsOf(ws.workspaceId)).filter((c) => c.erased_at === null).map((c) => c.id);
      expect(live).toHaveLength(1);
      const messages = await messagesOf(ws.workspaceId);
      expect(messages.length).toBeGreaterThan(0);
      expect(messages.every((m) => m.contact_id === live[0])).toBe(true);
    }
  });

  it("when a merge races customers' messages for the source, then every message ends on the target", async () => {
    for (let round = 0; round < 3; round++) {
      const { ws, meta, phone, target, source } = await twoContactsWithThreads();

      const [merged] = await Promise.all([
        ws.api.POST('/contacts/{id}/merge', { params: { path: { id: target.id } }, body: { sourceIds: [source.id] } }),
        ...Array.from({ length: 8 }, (_, i) => deliver(meta, whatsappText((i % 2 ? phone.short : phone.full).slice(1), `corrida ${i}`))),
      ]);

      expect(merged.response.status).toBe(200);
      const messages = await messagesOf(ws.workspaceId);
      expect(messages).toHaveLength(10);
      expect(messages.filter((m) => m.contact_id !== target.id)).toEqual([]);
      const live = (await contactsOf(ws.workspaceId)).filter((c) => c.erased_at === null).map((c) => c.id);
      expect(live).toEqual([target.id]);
    }
  });
});
