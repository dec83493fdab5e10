// Automations running by themselves, through the job queue as the service runs them, read back
// through the API: the README's refund example end to end (the change, its history and events by
// the automation, the run in both logs, automation.run), conditions that do not hold leaving no
// run, position order and `stop`, actions that fail or are skipped, the loop guard, thread.idle
// timers scheduled, cancelled and fired, and exactly one application when two holders of the same
// job race or a claim is lost.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { runEventAutomations } from '../src/automations/engine.js';
import { resetIdleTimers } from '../src/automations/triggers.js';
import { claimJobs, type Job } from '../src/jobs/queue.js';
import { buildContact, buildHuman, createWorkspace, UUID, type TestWorkspace } from './helpers/api.js';
import { createAutomation as create, events, refunds, runQueuedInOrder, runsOf, stageId, sandboxInbound as inbound, thread } from './helpers/automations.js';
import { createMetaChannel } from './helpers/channels.js';
import { GraphDouble } from './helpers/graph.js';
import { waitFor } from './helpers/processes.js';
import { jobsLeft } from './helpers/queue.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];
type Run = Schemas['AutomationRun'];

let server: TestServer;
let graph: GraphDouble;
let own: OwnDatabase | undefined;

beforeAll(async () => {
  graph = await GraphDouble.start();
  // Its workers take every job of their database: one of their own (PGlite: each server has its own).
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { metaGraphUrl: graph.url, jobPollMs: 200, retryBaseMs: 20 } });
});
afterAll(async () => {
  await server?.close();
  await graph?.close();
  await own?.drop();
});

async function threadRuns(ws: TestWorkspace, threadId: string): Promise<Run[]> {
  const { data, response } = await ws.api.GET('/threads/{id}/automation-runs', { params: { path: { id: threadId }, query: { limit: 100 } } });
  expect(response.status).toBe(200);
  return data!.data;
}

/** The README's classic use: the NPS question when a thread is closed. */
const npsWhenClosed: Schemas['AutomationCreate'] = {
  name: 'Pesquisa NPS ao encerrar',
  trigger: { event: 'thread.updated' },
  conditions: { all: [{ field: 'thread.status', operator: 'equals', value: 'closed' }] },
  actions: [{ type: 'request_nps' }],
};

/** Waits until the workspace's automation jobs are all done (their effects committed with them). */
const settled = (ws: TestWorkspace): Promise<void> =>
  waitFor('the automations to run', async () => (await jobsLeft(server.db, ws.workspaceId, 'automation-event')) === 0, 10_000);

describe('automations on events', () => {
  it('when the customer writes about a refund, then the thread moves and is labelled by the automation, with its history, events and run', async () => {
    const ws = await createWorkspace(server);
    const emAtendimento = await stageId(ws, 'Em atendimento');
    const automation = await create(ws, refunds(emAtendimento));

    const { threadId, messageId } = await inbound(ws, 'Oi, NÃO recebi o pedido. Quero o REEMBOLSO, por favor');
    await settled(ws);

    const after = await thread(ws, threadId);
    expect(after).toMatchObject({ stageId: emAtendimento, labels: ['reembolso'] });
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: threadId }, query: { limit: 100 } } });
    const byAutomation = history!.data.filter((e) => e.actor.type === 'automation');
    expect(byAutomation.map((e) => [e.field, e.to, e.actor.id])).toEqual([
      ['stageId', emAtendimento, automation.id],
      ['labels', ['reembolso'], automation.id],
    ]);
    // The automation's two changes of the thread are one change, as a PATCH of both fields: one thread.updated with both.
    const updates = (await events(ws, 'thread.updated')).filter((e) => (e.data.object as Schemas['Thread']).id === threadId);
    expect(updates.map((e) => e.data.actor)).toEqual([{ type: 'automation', id: automation.id }]);
    expect(updates[0]!.data.object).toMatchObject({ stageId: emAtendimento, labels: ['reembolso'] });

    const created = (await events(ws, 'message.created')).find((e) => (e.data.object as Schemas['Message']).id === messageId)!;
    const runs = await runsOf(ws, automation.id);
    expect(runs).toEqual([
      {
        id: expect.stringMatching(UUID),
        automationId: automation.id,
        eventId: created.id,
        threadId,
        status: 'succeeded',
        reason: null,
        actions: [
          { type: 'move_stage', status: 'succeeded', reason: null },
          { type: 'add_labels', status: 'succeeded', reason: null },
        ],
        createdAt: expect.any(String),
      },
    ]);
    expect(await threadRuns(ws, threadId)).toEqual(runs);
    const audited = await events(ws, 'automation.run');
    expect(audited.map((e) => [e.data.object, e.data.actor])).toEqual([[runs[0], { type: 'automation', id: automation.id }]]);
  });

  it('when the conditions do not hold, then nothing changes and no run is recorded', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, refunds(await stageId(ws, 'Em atendimento')));

    const { threadId } = await inbound(ws, 'Bom dia! Qual o prazo de entrega?');
    await settled(ws);

    expect((await thread(ws, threadId)).labels).toEqual([]);
    expect(await runsOf(ws, automation.id)).toEqual([]);
    expect(await events(ws, 'automation.run')).toEqual([]);
  });

  it('when several match, then they run in position order and a stop ends the event there; disabled ones never run', async () => {
    const ws = await createWorkspace(server);
    const label = (name: string, labels: string[], extra: Schemas['AutomationAction'][] = []): Schemas['AutomationCreate'] => ({
      name,
      trigger: { event: 'message.received' },
      actions: [{ type: 'add_labels', target: 'thread', labels }, ...extra],
    });
    const second = await create(ws, label('segunda', ['b'], [{ type: 'stop' }, { type: 'add_labels', target: 'contact', labels: ['depois do stop'] }]));
    const first = await create(ws, { ...label('primeira', ['a']), position: 1 });
    await create(ws, { ...label('desligada', ['x']), enabled: false, position: 1 });
    const third = await create(ws, label('terceira', ['c']));

    const { threadId } = await inbound(ws, 'Oi');
    await settled(ws);

    expect((await thread(ws, threadId)).labels).toEqual(['a', 'b']);
    expect((await runsOf(ws, first.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect((await runsOf(ws, second.id))[0]!.actions.map((a) => [a.type, a.status])).toEqual([
      ['add_labels', 'succeeded'],
      ['stop', 'succeeded'],
      ['add_labels', 'succeeded'],
    ]);
    expect(await runsOf(ws, third.id)).toEqual([]);
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: (await thread(ws, threadId)).contactId } } });
    expect(contact!.labels).toEqual(['depois do stop']);
  });

  it('when an action fails, then it alone is undone, those before and after it apply once and the run is failed with its reason', async () => {
    const ws = await createWorkspace(server);
    const { data: gone } = await ws.api.POST('/stages', { body: { name: 'Temporária' } });
    const automation = await create(ws, {
      name: 'Etapa apagada',
      trigger: { event: 'message.received' },
      actions: [
        { type: 'set_attribute', key: 'origem', value: 'whatsapp' },
        { type: 'move_stage', stageId: gone!.id },
        { type: 'add_labels', target: 'contact', labels: ['depois'] },
      ],
    });
    expect((await ws.api.DELETE('/stages/{id}', { params: { path: { id: gone!.id } } })).response.status).toBe(204);

    const { threadId } = await inbound(ws, 'Oi');
    await settled(ws);

    const [run] = await runsOf(ws, automation.id);
    expect(run).toMatchObject({ status: 'failed', reason: expect.stringMatching(/^invalid_reference: /) });
    expect(run!.actions.map((a) => [a.type, a.status])).toEqual([
      ['set_attribute', 'succeeded'],
      ['move_stage', 'failed'],
      ['add_labels', 'succeeded'],
    ]);
    const contactId = (await thread(ws, threadId)).contactId;
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: contactId } } });
    expect(contact).toMatchObject({ attributes: { origem: 'whatsapp' }, labels: ['depois'] });
    // The first go (no savepoints) rolled back whole: each change has one event.
    const updates = (await events(ws, 'contact.updated')).filter((e) => (e.data.object as Schemas['Contact']).id === contactId);
    expect(updates.map((e) => e.data.actor)).toEqual([
      { type: 'automation', id: automation.id },
      { type: 'automation', id: automation.id },
    ]);
    expect((await events(ws, 'thread.updated')).filter((e) => e.data.actor?.type === 'automation')).toEqual([]);
  });

  it("when actions on the thread's fields follow one another, then they are one change applied in order, and one that fails is undone alone", async () => {
    const ws = await createWorkspace(server);
    const emAtendimento = await stageId(ws, 'Em atendimento');
    const { data: gone } = await ws.api.POST('/stages', { body: { name: 'Temporária' } });
    const together = await create(ws, {
      name: 'Juntas',
      trigger: { event: 'message.received' },
      actions: [
        { type: 'add_labels', target: 'thread', labels: ['a', 'b'] },
        { type: 'move_stage', stageId: emAtendimento },
        { type: 'remove_labels', target: 'thread', labels: ['A'] },
      ],
    });
    const failing = await create(ws, {
      name: 'Uma falha',
      trigger: { event: 'message.received' },
      actions: [
        { type: 'move_stage', stageId: gone!.id },
        { type: 'add_labels', target: 'thread', labels: ['c'] },
      ],
    });
    expect((await ws.api.DELETE('/stages/{id}', { params: { path: { id: gone!.id } } })).response.status).toBe(204);

    const { threadId } = await inbound(ws, 'Oi');
    await settled(ws);

    expect(await thread(ws, threadId)).toMatchObject({ stageId: emAtendimento, labels: ['b', 'c'] });
    expect((await runsOf(ws, together.id)).map((r) => [r.status, r.actions.map((a) => a.status)])).toEqual([
      ['succeeded', ['succeeded', 'succeeded', 'succeeded']],
    ]);
    expect((await runsOf(ws, failing.id)).map((r) => [r.status, r.actions.map((a) => [a.type, a.status])])).toEqual([
      [
        'failed',
        [
          ['move_stage', 'failed'],
          ['add_labels', 'succeeded'],
        ],
      ],
    ]);
    // One change for the first automation's three actions; the second's label alone (its move undone). Oldest first:
    const updates = (await events(ws, 'thread.updated')).filter((e) => e.data.actor?.type === 'automation').reverse();
    expect(updates.map((e) => [e.data.actor?.id, (e.data.object as Schemas['Thread']).labels])).toEqual([
      [together.id, ['b']],
      [failing.id, ['b', 'c']],
    ]);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: threadId }, query: { limit: 100 } } });
    expect(history!.data.filter((e) => e.actor.type === 'automation').map((e) => [e.field, e.to])).toEqual([
      ['stageId', emAtendimento],
      ['labels', ['b']],
      ['labels', ['b', 'c']],
    ]);
  });

  it('when a message goes to a contact outside the 24-hour window, then it is skipped without a fallback and the template goes with one', async () => {
    const ws = await createWorkspace(server);
    const whatsapp = await createMetaChannel(ws, 'whatsapp');
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: opened } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: whatsapp.channel.id } });
    const skip = await create(ws, {
      name: 'Boas-vindas',
      trigger: { event: 'thread.updated' },
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'boas-vindas' }] },
      actions: [{ type: 'send_message', content: 'Olá! Como podemos ajudar?' }],
    });
    const fallback = await create(ws, {
      name: 'Boas-vindas com modelo',
      trigger: { event: 'thread.updated' },
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'boas-vindas' }] },
      actions: [{ type: 'send_message', content: 'Olá!', fallbackTemplate: { name: 'boas_vindas', language: 'pt_BR' } }],
    });

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened!.id } }, body: { labels: ['boas-vindas'] } });
    await settled(ws);

    expect((await runsOf(ws, skip.id))[0]).toMatchObject({
      status: 'succeeded',
      actions: [{ type: 'send_message', status: 'skipped', reason: 'outside_messaging_window' }],
    });
    expect((await runsOf(ws, fallback.id))[0]).toMatchObject({ status: 'succeeded', actions: [{ type: 'send_message', status: 'succeeded', reason: null }] });
    const { data: messages } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId: opened!.id } } });
    expect(messages!.data.map((m) => [m.direction, m.template?.name ?? null])).toEqual([['outbound', 'boas_vindas']]);
    const sent = (await events(ws, 'message.created')).map((e) => e.data.actor);
    expect(sent).toEqual([{ type: 'automation', id: fallback.id }]);
  });

  it('when an Instagram message has a fallback template outside the window, then it is skipped outside_messaging_window (Instagram has no templates)', async () => {
    const ws = await createWorkspace(server);
    const instagram = await createMetaChannel(ws, 'instagram');
    const { data: contact } = await ws.api.POST('/contacts', { body: { ...buildContact(), instagramId: `17843${Date.now() % 1e10}` } });
    const { data: opened } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: instagram.channel.id } });
    const automation = await create(ws, {
      name: 'Boas-vindas no Instagram',
      trigger: { event: 'thread.updated' },
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'boas-vindas' }] },
      actions: [{ type: 'send_message', content: 'Olá!', fallbackTemplate: { name: 'boas_vindas', language: 'pt_BR' } }],
    });

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened!.id } }, body: { labels: ['boas-vindas'] } });
    await settled(ws);

    expect((await runsOf(ws, automation.id))[0]).toMatchObject({
      status: 'succeeded',
      actions: [{ type: 'send_message', status: 'skipped', reason: 'outside_messaging_window' }],
    });
  });

  it('when request_nps meets a contact it cannot reach, then it is skipped contact_unreachable, not failed', async () => {
    const ws = await createWorkspace(server);
    const whatsapp = ws.channels.find((c) => c.type === 'whatsapp')!;
    const { data: contact } = await ws.api.POST('/contacts', { body: { name: 'Só e-mail', email: `so.email.${Date.now()}@exemplo.com.br` } });
    const { data: opened } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: whatsapp.id } });
    const automation = await create(ws, {
      name: 'NPS ao fechar',
      trigger: { event: 'thread.updated' },
      conditions: { all: [{ field: 'thread.status', operator: 'equals', value: 'closed' }] },
      actions: [{ type: 'request_nps' }],
    });

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened!.id } }, body: { status: 'closed' } });
    await settled(ws);

    expect((await runsOf(ws, automation.id))[0]).toMatchObject({
      status: 'succeeded',
      actions: [{ type: 'request_nps', status: 'skipped', reason: 'contact_unreachable' }],
    });
  });

  it('when labels or attributes would pass their bounds, then the action fails limit_reached (no database text), and a blank label is refused at create', async () => {
    const ws = await createWorkspace(server);
    const blank = await ws.api.POST('/automations', {
      body: { name: 'Vazio', trigger: { event: 'message.received' }, actions: [{ type: 'add_labels', target: 'thread', labels: [' ', 'ok'] }] },
    });
    expect(blank.response.status).toBe(400);
    expect(blank.error!.error.details!.map((d) => d.path)).toContain('/body/actions/0/labels/0');

    const { threadId } = await inbound(ws, 'Oi');
    const contactId = (await thread(ws, threadId)).contactId;
    const full = await ws.api.PATCH('/contacts/{id}', {
      params: { path: { id: contactId } },
      body: {
        labels: Array.from({ length: 20 }, (_, i) => `l${i}`),
        attributes: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a${i}`, i])),
      },
    });
    expect(full.response.status).toBe(200);
    const automation = await create(ws, {
      name: 'Além dos limites',
      trigger: { event: 'message.received' },
      actions: [
        { type: 'add_labels', target: 'contact', labels: ['novo'] },
        { type: 'set_attribute', key: 'outro', value: 'x' },
        { type: 'add_labels', target: 'thread', labels: Array.from({ length: 20 }, (_, i) => `t${i}`) },
        { type: 'add_labels', target: 'thread', labels: ['mais'] },
      ],
    });

    await inbound(ws, 'De novo');
    await settled(ws);

    const [run] = await runsOf(ws, automation.id);
    expect(run!.actions.map((a) => [a.type, a.status, a.reason])).toEqual([
      ['add_labels', 'failed', 'limit_reached: The contact would have 21 labels; at most 20.'],
      ['set_attribute', 'failed', 'limit_reached: The contact has 50 attributes, its most; this one would be one more.'],
      ['add_labels', 'succeeded', null],
      ['add_labels', 'failed', 'limit_reached: The thread would have 21 labels; at most 20.'],
    ]);
    expect(run!.status).toBe('failed');
    expect((await thread(ws, threadId)).labels).toHaveLength(20);
  });

  it('when an automation triggers itself, then the loop guard records loop_prevented and it stops', async () => {
    const ws = await createWorkspace(server);
    const selfish = await create(ws, {
      name: 'Rótulo a cada mudança',
      trigger: { event: 'thread.updated' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['mexido'] }, { type: 'assign_round_robin' }],
    });
    await ws.api.POST('/agents', { body: buildHuman({ availability: 'online' }) });
    const { threadId } = await inbound(ws, 'Oi');

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { stageId: await stageId(ws, 'Em atendimento') } });
    await settled(ws);

    const runs = await runsOf(ws, selfish.id);
    // The PATCH's event ran it; each of its own two changes' events found it in their chain.
    expect(runs.map((r) => [r.status, r.reason]).sort()).toEqual([
      ['skipped', 'loop_prevented'],
      ['skipped', 'loop_prevented'],
      ['succeeded', null],
    ]);
    expect((await thread(ws, threadId)).labels).toEqual(['mexido']);
  });

  it('when automations chain, then each may trigger the next up to a causation depth of 3', async () => {
    const ws = await createWorkspace(server);
    const step = (name: string, has: string | null, adds: string): Schemas['AutomationCreate'] => ({
      name,
      trigger: { event: 'thread.updated' },
      conditions: {
        all: [
          ...(has ? [{ field: 'thread.labels', operator: 'contains' as const, value: has }] : [{ field: 'thread.labels', operator: 'is_not_set' as const }]),
          { field: 'thread.labels', operator: 'not_contains', value: adds },
        ],
      },
      actions: [{ type: 'add_labels', target: 'thread', labels: [adds] }],
    });
    // Each placed first: an event's automations see the changes of those before them in position order,
    // so in this order each step waits for the event its predecessor's change records.
    const a = await create(ws, { ...step('A', null, 'a'), position: 1 });
    const b = await create(ws, { ...step('B', 'a', 'b'), position: 1 });
    const c = await create(ws, { ...step('C', 'b', 'c'), position: 1 });
    const d = await create(ws, { ...step('D', 'c', 'd'), position: 1 });
    const { threadId } = await inbound(ws, 'Oi');

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { status: 'open', stageId: await stageId(ws, 'Em atendimento') } });
    await settled(ws);

    expect((await thread(ws, threadId)).labels).toEqual(['a', 'b', 'c']);
    expect((await runsOf(ws, a.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect((await runsOf(ws, b.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect((await runsOf(ws, c.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect((await runsOf(ws, d.id)).map((r) => [r.status, r.reason])).toEqual([['skipped', 'loop_prevented']]);
  });

  it('when the workspace is open all week, then time.businessHours is true for its runs (its own settings, not the defaults)', async () => {
    const ws = await createWorkspace(server);
    const allDay = [['00:00', '24:00']] as Array<[string, string]>;
    const { response } = await ws.api.PATCH('/settings', {
      body: { timezone: 'America/Manaus', businessHours: { mon: allDay, tue: allDay, wed: allDay, thu: allDay, fri: allDay, sat: allDay, sun: allDay } },
    });
    expect(response.status).toBe(200);
    const within = await create(ws, {
      name: 'Dentro do horário',
      trigger: { event: 'message.received' },
      conditions: { all: [{ field: 'time.businessHours', operator: 'equals', value: true }] },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['no horário'] }],
    });
    const outside = await create(ws, {
      name: 'Fora do horário',
      trigger: { event: 'message.received' },
      conditions: { all: [{ field: 'time.businessHours', operator: 'equals', value: false }] },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['fora do horário'] }],
    });

    const { threadId } = await inbound(ws, 'Oi', '+5511933330001');
    await settled(ws);

    expect((await thread(ws, threadId)).labels).toEqual(['no horário']);
    expect(await runsOf(ws, within.id)).toHaveLength(1);
    expect(await runsOf(ws, outside.id)).toEqual([]);
  });

  it('when a contact is created, then its automation labels the contact', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, {
      name: 'Novo contato',
      trigger: { event: 'contact.created' },
      actions: [{ type: 'add_labels', target: 'contact', labels: ['novo'] }],
    });
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    await settled(ws);

    const { data } = await ws.api.GET('/contacts/{id}', { params: { path: { id: contact!.id } } });
    expect(data!.labels).toEqual(['novo']);
    expect(await runsOf(ws, automation.id)).toMatchObject([{ threadId: null, status: 'succeeded' }]);
  });

  it('when a thread is closed, then request_nps asks the NPS question; the customer answers "9" and the statistics count it', async () => {
    const ws = await createWorkspace(server);
    const person = (await ws.api.POST('/agents', { body: buildHuman({ availability: 'online' }) })).data!;
    const automation = await create(ws, npsWhenClosed);
    const { threadId } = await inbound(ws, 'Meu pedido chegou, obrigado!', '+5511922220001');
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { agentId: person.id } });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { status: 'closed' } });
    await settled(ws);

    const asked = await thread(ws, threadId);
    expect(asked).toMatchObject({ status: 'closed', npsRequestedAt: expect.any(String), npsScore: null });
    expect((await runsOf(ws, automation.id)).map((r) => [r.status, r.actions])).toEqual([
      ['succeeded', [{ type: 'request_nps', status: 'succeeded', reason: null }]],
    ]);
    const question = (await events(ws, 'message.created')).find((e) => e.data.actor?.type === 'automation');
    expect(question).toMatchObject({ data: { object: { threadId, direction: 'outbound' }, actor: { type: 'automation', id: automation.id } } });

    await inbound(ws, ' 9! ', '+5511922220001');
    await settled(ws);

    const answered = await thread(ws, threadId);
    expect(answered).toMatchObject({ id: threadId, status: 'closed', npsScore: 9 });
    const day = answered.npsCreatedAt!.slice(0, 10);
    const window = { workspaceId: ws.workspaceId, dateFrom: `${day}T00:00:00.000Z`, dateTo: `${day}T23:59:59.999Z` };
    expect((await ws.api.GET('/threads/stats/nps', { params: { query: window } })).data).toEqual({
      promotores: 1,
      neutros: 0,
      detratores: 0,
      total: 1,
      npsScore: 100,
    });
    const byAgent = (await ws.api.GET('/threads/stats/nps', { params: { query: { ...window, groupBy: 'agent' } } })).data!;
    expect(byAgent.groups).toEqual([{ key: person.id, promotores: 1, neutros: 0, detratores: 0, total: 1, npsScore: 100 }]);
    // The score changed no status and recorded no thread.updated: the question went once.
    expect(await runsOf(ws, automation.id)).toHaveLength(1);
  });

  it('when the runs are asked of an automation or thread the workspace does not have, then 404', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const automation = await create(other, refunds(await stageId(other, 'Em atendimento')));
    const { threadId } = await inbound(other, 'Oi');

    expect((await ws.api.GET('/automations/{id}/runs', { params: { path: { id: automation.id } } })).response.status).toBe(404);
    expect((await ws.api.GET('/threads/{id}/automation-runs', { params: { path: { id: threadId } } })).response.status).toBe(404);
  });
});

describe('thread.idle', () => {
  /** The workspace's waiting idle timers: [automation, thread, message, due]. */
  async function timers(ws: TestWorkspace): Promise<Array<{ automationId: string; threadId: string; messageId: string; due: number }>> {
    const rows = await server.db
      .selectFrom('jobs')
      .select(['payload', 'run_at'])
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'automation-idle')
      .execute();
    return rows.map((r) => ({ ...(r.payload as { automationId: string; threadId: string; messageId: string }), due: r.run_at.getTime() }));
  }

  /** As if `ms` had passed: the thread's messages and the workspace's timers moved that much into the past. */
  async function travel(ws: TestWorkspace, threadId: string, ms: number): Promise<void> {
    await sql`update messages set created_at = created_at - ${ms} * interval '1 millisecond'
               where workspace_id = ${ws.workspaceId} and thread_id = ${threadId}`.execute(server.db);
    await server.db
      .updateTable('jobs')
      .set((eb) => ({ run_at: eb('run_at', '-', sql<Date>`${ms} * interval '1 millisecond'`) }))
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'automation-idle')
      .execute();
    await sql`select pg_notify('sf_jobs', 'automation-idle')`.execute(server.db);
  }

  const closeWhenSilent: Schemas['AutomationCreate'] = {
    name: 'Encerrar sem resposta',
    trigger: { event: 'thread.idle', minutes: 1, waitingOn: 'customer' },
    actions: [{ type: 'set_status', status: 'closed' }],
  };

  it('when we answered and the customer stays silent for its minutes, then the timer fires once, by the automation', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, closeWhenSilent);
    const { threadId } = await inbound(ws, 'Oi', '+5511911110001');
    expect(await timers(ws)).toEqual([]);
    const opened = await thread(ws, threadId);
    const { data: answer } = await ws.api.POST('/messages', {
      body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá! Em que podemos ajudar?' },
    });

    expect(await timers(ws)).toEqual([{ automationId: automation.id, threadId, messageId: answer!.id, due: Date.parse(answer!.createdAt) + 60_000 }]);
    await travel(ws, threadId, 61_000);
    await waitFor('the thread to be closed', async () => (await thread(ws, threadId)).status === 'closed', 5_000);

    const runs = await runsOf(ws, automation.id);
    expect(runs).toMatchObject([{ eventId: null, threadId, status: 'succeeded', actions: [{ type: 'set_status', status: 'succeeded' }] }]);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: threadId } } });
    expect(history!.data.at(-1)).toMatchObject({ field: 'status', to: 'closed', actor: { type: 'automation', id: automation.id } });
    expect(await timers(ws)).toEqual([]);
  });

  it('when the customer answers, then the timer waiting on them is cancelled and one waiting on us starts; closing cancels that one', async () => {
    const ws = await createWorkspace(server);
    await create(ws, closeWhenSilent);
    const nudge = await create(ws, {
      name: 'Avisar a equipe',
      trigger: { event: 'thread.idle', minutes: 30, waitingOn: 'agent' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['esperando'] }],
    });
    const { threadId } = await inbound(ws, 'Oi', '+5511911110002');
    const opened = await thread(ws, threadId);
    await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    expect((await timers(ws)).map((t) => t.automationId)).not.toContain(nudge.id);

    const { messageId } = await inbound(ws, 'Quero saber do meu pedido', '+5511911110002');
    expect((await timers(ws)).map((t) => [t.automationId, t.messageId])).toEqual([[nudge.id, messageId]]);

    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { status: 'closed' } });
    expect(await timers(ws)).toEqual([]);
  });

  it('when an idle automation is created while threads are already silent, then each silence under way on its side is timed (an overdue one fires at once), and no other thread is', async () => {
    const ws = await createWorkspace(server);
    const waiting = await inbound(ws, 'Oi', '+5511911110004');
    const opened = await thread(ws, waiting.threadId);
    const { data: answer } = await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    const unanswered = await inbound(ws, 'Alguém aí?', '+5511911110005');
    const closed = await inbound(ws, 'Tchau', '+5511911110006');
    const closedThread = await thread(ws, closed.threadId);
    await ws.api.POST('/messages', { body: { contactId: closedThread.contactId, channelId: closedThread.channelId, content: 'Até mais!' } });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: closed.threadId } }, body: { status: 'closed' } });

    const later = await create(ws, {
      ...closeWhenSilent,
      name: 'Encerrar sem resposta (2 h)',
      trigger: { event: 'thread.idle', minutes: 120, waitingOn: 'customer' },
    });
    expect(await timers(ws)).toEqual([
      { automationId: later.id, threadId: waiting.threadId, messageId: answer!.id, due: Date.parse(answer!.createdAt) + 120 * 60_000 },
    ]);

    await ws.api.DELETE('/automations/{id}', { params: { path: { id: later.id } } });
    await travel(ws, waiting.threadId, 121 * 60_000);
    const overdue = await create(ws, closeWhenSilent);
    await waitFor('the overdue silence to close the thread', async () => (await thread(ws, waiting.threadId)).status === 'closed', 5_000);
    expect(await runsOf(ws, overdue.id)).toMatchObject([{ eventId: null, threadId: waiting.threadId, status: 'succeeded' }]);
    expect((await thread(ws, unanswered.threadId)).status).toBe('open');
    expect(await timers(ws)).toEqual([]);
  });

  it('when an idle automation is changed, disabled, enabled or deleted, then its waiting timers follow, and a silence it already ran for is not timed again', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, {
      name: 'Lembrar o cliente',
      trigger: { event: 'thread.idle', minutes: 30, waitingOn: 'customer' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['lembrete'] }],
    });
    const { threadId } = await inbound(ws, 'Oi', '+5511911110007');
    const opened = await thread(ws, threadId);
    const { data: answer } = await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    const sent = Date.parse(answer!.createdAt);
    const patch = async (body: Schemas['AutomationUpdate']): Promise<void> => {
      const { response } = await ws.api.PATCH('/automations/{id}', { params: { path: { id: automation.id } }, body });
      expect(response.status).toBe(200);
    };
    expect((await timers(ws)).map((t) => t.due)).toEqual([sent + 30 * 60_000]);

    await patch({ trigger: { event: 'thread.idle', minutes: 10, waitingOn: 'customer' } });
    expect((await timers(ws)).map((t) => t.due)).toEqual([sent + 10 * 60_000]);
    await patch({ name: 'Lembrar o cliente (10 min)' });
    expect((await timers(ws)).map((t) => t.due)).toEqual([sent + 10 * 60_000]);
    await patch({ enabled: false });
    expect(await timers(ws)).toEqual([]);
    await patch({ enabled: true });
    expect(await timers(ws)).toEqual([{ automationId: automation.id, threadId, messageId: answer!.id, due: sent + 10 * 60_000 }]);

    await travel(ws, threadId, 11 * 60_000);
    await waitFor('the reminder', async () => (await thread(ws, threadId)).labels.includes('lembrete'), 5_000);
    await waitFor('the fired timer to end', async () => (await timers(ws)).length === 0, 5_000);
    await patch({ enabled: false });
    await patch({ enabled: true });
    expect(await timers(ws)).toEqual([]);
    expect(await runsOf(ws, automation.id)).toHaveLength(1);

    const other = await create(ws, { ...closeWhenSilent, trigger: { event: 'thread.idle', minutes: 60, waitingOn: 'customer' } });
    expect((await timers(ws)).map((t) => t.automationId)).toEqual([other.id]);
    const { response } = await ws.api.DELETE('/automations/{id}', { params: { path: { id: other.id } } });
    expect(response.status).toBe(204);
    expect(await timers(ws)).toEqual([]);
  });

  it('when an idle automation starts waiting over more open threads than one statement takes, then every silence gets its timer, batch after batch', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, { ...closeWhenSilent, enabled: false });
    const answered: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { threadId } = await inbound(ws, 'Oi', `+551191111002${i}`);
      const opened = await thread(ws, threadId);
      await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
      answered.push(threadId);
    }
    await inbound(ws, 'Ainda esperando', '+5511911110029');
    expect(await timers(ws)).toEqual([]);
    // Two threads a statement: three statements over the six open threads, five of them silent on the customer's side.
    await resetIdleTimers(server.db, ws.workspaceId, automation.id, { event: 'thread.idle', minutes: 1, waitingOn: 'customer' }, 2);
    expect((await timers(ws)).map((t) => t.threadId).sort()).toEqual([...answered].sort());
    await resetIdleTimers(server.db, ws.workspaceId, automation.id, { event: 'thread.idle', minutes: 1, waitingOn: 'customer' }, 2);
    expect(await timers(ws)).toHaveLength(5);
    await resetIdleTimers(server.db, ws.workspaceId, automation.id, undefined, 2);
    expect(await timers(ws)).toEqual([]);
  });

  it('when the silence ended while its timer was held, then the timer does nothing', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, closeWhenSilent);
    const { threadId } = await inbound(ws, 'Oi', '+5511911110003');
    const opened = await thread(ws, threadId);
    await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    // The timer's job taken out of the queue's hands, as a running one would be, then the customer answers.
    const [timer] = await timers(ws);
    await server.db
      .updateTable('jobs')
      .set({ locked_by: 'elsewhere', locked_until: new Date(Date.now() + 60_000) })
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'automation-idle')
      .execute();
    await inbound(ws, 'Ainda estou aqui', '+5511911110003');
    await server.db
      .updateTable('jobs')
      .set({ locked_by: null, locked_until: null })
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'automation-idle')
      .where(sql<boolean>`payload->>'messageId' = ${timer!.messageId}`)
      .execute();
    await travel(ws, threadId, 61_000);

    await waitFor('the stale timer to end', async () => (await timers(ws)).length === 0, 5_000);
    expect((await thread(ws, threadId)).status).toBe('open');
    expect(await runsOf(ws, automation.id)).toEqual([]);
  });
});

// A job's run, whatever its trigger (a customer's message runs its automations inline, in its own
// transaction: test/automation-inline.test.ts), so contact.created's here.
describe('exactly once', () => {
  let quiet: TestServer;
  let quietDb: OwnDatabase | undefined;
  beforeAll(async () => {
    // No workers: the test holds the jobs itself.
    quietDb = databaseUrl ? await ownDatabase() : undefined;
    quiet = await startServer({ databaseUrl: quietDb?.url });
  });
  afterAll(async () => {
    await quiet?.close();
    await quietDb?.drop();
  });

  it('when a lease runs out and a second holder takes the job while the first still runs it, then only one applies its actions', async () => {
    const ws = await createWorkspace(quiet);
    const automation = await create(ws, {
      name: 'Rótulo',
      trigger: { event: 'contact.created' },
      actions: [
        { type: 'add_labels', target: 'contact', labels: ['uma vez'] },
        { type: 'set_attribute', key: 'vezes', value: 1 },
      ],
    });
    const { data: created } = await ws.api.POST('/contacts', { body: buildContact() });
    const first = await claimJobs(quiet.db, { queue: 'automation-event', workerId: 'first', limit: 1, leaseMs: 1 });
    expect(first.jobs).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await claimJobs(quiet.db, { queue: 'automation-event', workerId: 'second', limit: 1, leaseMs: 60_000 });
    expect(second.jobs.map((j) => j.id)).toEqual(first.jobs.map((j) => j.id));

    const outcomes = await Promise.allSettled([
      runEventAutomations(quiet.db, first.jobs[0] as Job<'automation-event'>),
      runEventAutomations(quiet.db, second.jobs[0] as Job<'automation-event'>),
    ]);

    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'fulfilled']);
    expect(await runsOf(ws, automation.id)).toHaveLength(1);
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: created!.id } } });
    expect(contact).toMatchObject({ labels: ['uma vez'], attributes: { vezes: 1 } });
    expect((await events(ws, 'contact.updated')).map((e) => e.data.actor)).toEqual([
      { type: 'automation', id: automation.id },
      { type: 'automation', id: automation.id },
    ]);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(0);
  });

  it('when a thread is assigned and then closed before either event ran, then a rule on closed threads runs for the closing only: conditions see the thread as its event has it', async () => {
    const ws = await createWorkspace(quiet);
    const person = (await ws.api.POST('/agents', { body: buildHuman({ availability: 'online' }) })).data!;
    const automation = await create(ws, npsWhenClosed);
    const { threadId } = await inbound(ws, 'Obrigado!', '+5511900000003');
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { agentId: person.id } });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { status: 'closed' } });

    // Both changes committed before any of their runs: the assignment's run finds the thread closed already.
    await runQueuedInOrder(quiet);

    const updates = await events(ws, 'thread.updated');
    const closing = updates.find((e) => (e.data.object as Schemas['Thread']).status === 'closed');
    expect(updates).toHaveLength(2);
    expect((await runsOf(ws, automation.id)).map((r) => [r.eventId, r.status, r.actions])).toEqual([
      [closing!.id, 'succeeded', [{ type: 'request_nps', status: 'succeeded', reason: null }]],
    ]);
  });

  it('when a contact is created and labelled before its run, then contact.created conditions see the labels it was created with', async () => {
    const ws = await createWorkspace(quiet);
    const automation = await create(ws, {
      name: 'Novo contato VIP',
      trigger: { event: 'contact.created' },
      conditions: { all: [{ field: 'contact.labels', operator: 'contains', value: 'vip' }] },
      actions: [{ type: 'set_attribute', key: 'boas_vindas', value: true }],
    });
    const { data: plain } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: vip } = await ws.api.POST('/contacts', { body: { ...buildContact(), labels: ['VIP'] } });
    await ws.api.PATCH('/contacts/{id}', { params: { path: { id: plain!.id } }, body: { labels: ['vip'] } });
    await ws.api.PATCH('/contacts/{id}', { params: { path: { id: vip!.id } }, body: { labels: [] } });

    await runQueuedInOrder(quiet);

    const created = await events(ws, 'contact.created');
    const vipCreated = created.find((e) => (e.data.object as Schemas['Contact']).id === vip!.id);
    expect((await runsOf(ws, automation.id)).map((r) => [r.eventId, r.status])).toEqual([[vipCreated!.id, 'succeeded']]);
  });

  it('when the same job is run again after it committed (a process died before it said so), then nothing more happens', async () => {
    const ws = await createWorkspace(quiet);
    const automation = await create(ws, {
      name: 'Rótulo',
      trigger: { event: 'contact.created' },
      actions: [{ type: 'add_labels', target: 'contact', labels: ['uma vez'] }],
    });
    await ws.api.POST('/contacts', { body: buildContact() });
    const { jobs } = await claimJobs(quiet.db, { queue: 'automation-event', workerId: 'only', limit: 1, leaseMs: 60_000 });

    await runEventAutomations(quiet.db, jobs[0] as Job<'automation-event'>);
    await expect(runEventAutomations(quiet.db, jobs[0] as Job<'automation-event'>)).rejects.toThrow(/taken by another instance|already ran/);

    expect(await runsOf(ws, automation.id)).toHaveLength(1);
    expect(await events(ws, 'contact.updated')).toHaveLength(1);
  });
});
