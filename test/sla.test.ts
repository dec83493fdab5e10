// Service levels (issue 37): SLA policies as a resource and their refusals (nothing stored); the
// clocks of a thread and thread.sla; sla.breached recorded on time with nobody writing (reaching a
// webhook and an automation that escalates), across a restart, and not when a person answered in
// time; a thread's one timer placed and moved with the clocks' change, waking the workers only when it falls due soon; a
// person's answer stored as one metric row; the response-time report against hand-computed
// figures, and its refusals.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildHuman, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { createAutomation, sandboxInbound } from './helpers/automations.js';
import { createJobListener } from '../src/jobs/listen.js';
import { createLogger } from '../src/logger.js';
import { responseTimes } from '../src/sla/report.js';
import { waitFor } from './helpers/processes.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];
type Policy = Schemas['SlaPolicy'];

const JOBS = { jobPollMs: 200, retryBaseMs: 20 };

let server: TestServer;
let own: OwnDatabase | undefined;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  // Its workers take every job of their database: one of its own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: JOBS });
});
afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await own?.drop();
});

/** The README's worked example: a 15-minute first response in business hours. */
const fifteenMinutes: Schemas['SlaPolicyCreate'] = {
  name: 'Primeira resposta em 15 minutos',
  targets: { firstResponseMinutes: 15 },
  businessHoursOnly: true,
  warnBeforeMinutes: 5,
};

async function createPolicy(ws: TestWorkspace, body: Schemas['SlaPolicyCreate']): Promise<Policy> {
  const { data, response, error } = await ws.api.POST('/sla-policies', { body });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!;
}

async function thread(ws: TestWorkspace, id: string): Promise<Schemas['Thread']> {
  const { data } = await ws.api.GET('/threads/{id}', { params: { path: { id } } });
  return data!;
}

async function events(ws: TestWorkspace, type: Schemas['EventType']): Promise<Schemas['Event'][]> {
  const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
  return data!.data;
}

/** Every hour of every day is business time, in UTC: a test's clock is the wall clock. */
async function alwaysOpen(ws: TestWorkspace): Promise<void> {
  const day: [string, string][] = [['00:00', '24:00']];
  const { response } = await ws.api.PATCH('/settings', {
    body: { timezone: 'UTC', businessHours: { mon: day, tue: day, wed: day, thu: day, fri: day, sat: day, sun: day } },
  });
  expect(response.status).toBe(200);
}

/** As if `ms` had passed for the thread's clocks: their due and warning times, and their timers, that much earlier. */
async function travel(db: TestServer['db'], ws: TestWorkspace, threadId: string, ms: number): Promise<void> {
  await sql`update sla_clocks set due_at = due_at - ${ms} * interval '1 millisecond', warn_at = warn_at - ${ms} * interval '1 millisecond'
             where workspace_id = ${ws.workspaceId} and thread_id = ${threadId}`.execute(db);
  await sql`update jobs set run_at = run_at - ${ms} * interval '1 millisecond', created_at = created_at - ${ms} * interval '1 millisecond'
             where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`}`.execute(db);
  await sql`select pg_notify('sf_jobs', 'sla-timer')`.execute(db);
}

describe('/sla-policies', () => {
  it('when the README policy is created, then it answers 201 whole and lists, reads, changes and deletes as created', async () => {
    const ws = await createWorkspace(server);
    const policy = await createPolicy(ws, fifteenMinutes);
    expect(policy).toEqual({
      id: expect.stringMatching(UUID),
      ...fifteenMinutes,
      enabled: true,
      position: 1,
      conditions: {},
      humanOnly: false,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: policy.createdAt,
    });
    const second = await createPolicy(ws, {
      name: 'VIP',
      targets: { resolutionMinutes: 60 },
      position: 1,
      conditions: { all: [{ field: 'contact.labels', operator: 'contains', value: 'vip' }] },
    });
    const { data: list } = await ws.api.GET('/sla-policies');
    expect(list!.data.map((p) => [p.position, p.name])).toEqual([
      [1, 'VIP'],
      [2, 'Primeira resposta em 15 minutos'],
    ]);
    const { data: changed } = await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: policy.id } }, body: { position: 1, warnBeforeMinutes: null } });
    expect(changed).toMatchObject({ position: 1, warnBeforeMinutes: null });
    const { response: deleted } = await ws.api.DELETE('/sla-policies/{id}', { params: { path: { id: second.id } } });
    expect(deleted.status).toBe(204);
    const { response: gone } = await ws.api.GET('/sla-policies/{id}', { params: { path: { id: second.id } } });
    expect(gone.status).toBe(404);
  });

  it('when a policy has no target, a target out of range, conditions outside the grammar, or is the 21st, then 400/422 with the error shape and nothing is stored', async () => {
    const ws = await createWorkspace(server);
    const refusals: Array<[unknown, number, string, string | undefined]> = [
      [{ name: 'x', targets: {} }, 400, 'validation_error', '/body/targets'],
      [{ name: 'x' }, 400, 'validation_error', '/body/targets'],
      [{ name: 'x', targets: { firstResponseMinutes: 0 } }, 400, 'validation_error', '/body/targets/firstResponseMinutes'],
      [{ name: 'x', targets: { resolutionMinutes: 525601 } }, 400, 'validation_error', '/body/targets/resolutionMinutes'],
      [{ name: 'x', targets: { nextResponseMinutes: 1.5 } }, 400, 'validation_error', '/body/targets/nextResponseMinutes'],
      [
        { name: 'x', targets: { firstResponseMinutes: 5 }, conditions: { all: [{ field: 'message.content', operator: 'contains', value: 'oi' }] } },
        400,
        'validation_error',
        '/body/conditions/all/0/field',
      ],
      [
        { name: 'x', targets: { firstResponseMinutes: 5 }, conditions: { all: [{ field: 'thread.labels', operator: 'gt', value: 1 }] } },
        400,
        'validation_error',
        '/body/conditions/all/0/operator',
      ],
      [
        { name: 'x', targets: { firstResponseMinutes: 5 }, conditions: { all: [{ field: 'thread.stageId', operator: 'equals', value: uuidv7() }] } },
        422,
        'invalid_reference',
        '/body/conditions/all/0/value',
      ],
    ];
    for (const [body, status, code, path] of refusals) {
      const res = await request(server, 'POST', '/v1/sla-policies', { apiKey: ws.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(status);
      const error = (res.body as Schemas['ErrorResponse']).error;
      expect(error.code).toBe(code);
      if (path) expect(error.details?.map((d) => d.path)).toContain(path);
    }
    const { data: none } = await ws.api.GET('/sla-policies');
    expect(none!.pagination.total).toBe(0);
    for (let i = 0; i < 20; i++) await createPolicy(ws, { name: `P${i}`, targets: { resolutionMinutes: 60 + i } });
    const res = await request(server, 'POST', '/v1/sla-policies', { apiKey: ws.apiKey, body: { name: 'P20', targets: { resolutionMinutes: 1 } } });
    expect(res.status).toBe(422);
    expect((res.body as Schemas['ErrorResponse']).error.code).toBe('limit_reached');
    const { data: twenty } = await ws.api.GET('/sla-policies', { params: { query: { limit: 100 } } });
    expect(twenty!.pagination.total).toBe(20);
  });

  it('when a key lacks settings:write or reports:read, then 403', async () => {
    const ws = await createWorkspace(server, { scopes: ['settings:read'] });
    expect((await request(server, 'POST', '/v1/sla-policies', { apiKey: ws.apiKey, body: fifteenMinutes })).status).toBe(403);
    const query = '?dateFrom=2026-11-01T00:00:00Z&dateTo=2026-11-02T00:00:00Z';
    expect((await request(server, 'GET', `/v1/reports/response-times${query}`, { apiKey: ws.apiKey })).status).toBe(403);
  });
});

describe('clocks and breaches', () => {
  it('when nobody answers a customer, then sla.breached is recorded within 5 s of the due time, reaches the webhook, and an automation escalates', async () => {
    const ws = await createWorkspace(server);
    await alwaysOpen(ws);
    await createPolicy(ws, { name: 'Um minuto', targets: { firstResponseMinutes: 1 }, businessHoursOnly: true, warnBeforeMinutes: 1 });
    const { response: created } = await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}/sla`, events: ['sla.breached'] } });
    expect(created.status).toBe(201);
    await createAutomation(ws, {
      name: 'Escalar SLA estourado',
      trigger: { event: 'sla.breached' },
      conditions: { all: [{ field: 'sla.metric', operator: 'equals', value: 'firstResponse' }] },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['sla-estourado'] }],
    });

    const { threadId } = await sandboxInbound(ws, 'Meu pedido não chegou', '+5511911112001');
    const opened = await thread(ws, threadId);
    const due = Date.parse(opened.createdAt) + 60_000;
    expect(opened.sla).toEqual({
      policyId: expect.stringMatching(UUID),
      firstResponseDueAt: new Date(due).toISOString(),
      nextResponseDueAt: null,
      resolutionDueAt: null,
      status: expect.stringMatching(/^(active|warning)$/),
      breached: [],
    });
    // warnBeforeMinutes as long as the target: the warning is due at once.
    await waitFor('the warning', async () => (await events(ws, 'sla.warning')).length === 1, 5_000);

    const [delivery] = await receiver.waitFor(1, '/sla', 75_000);
    expect(delivery!.at - due).toBeLessThanOrEqual(5_000);
    const [breach] = await events(ws, 'sla.breached');
    expect(Date.parse(breach!.createdAt)).toBeGreaterThanOrEqual(due);
    expect(Date.parse(breach!.createdAt) - due).toBeLessThanOrEqual(5_000);
    expect(breach!.data).toMatchObject({
      metric: 'firstResponse',
      actor: { type: 'system', id: null },
      object: { id: threadId, sla: { status: 'breached', breached: ['firstResponse'] } },
    });
    expect(JSON.parse(delivery!.body)).toMatchObject({ id: breach!.id, type: 'sla.breached', data: { metric: 'firstResponse' } });
    await waitFor('the escalation', async () => (await thread(ws, threadId)).labels.includes('sla-estourado'), 5_000);
    expect((await thread(ws, threadId)).sla).toMatchObject({
      status: 'breached',
      breached: ['firstResponse'],
      firstResponseDueAt: new Date(due).toISOString(),
    });
  }, 90_000);

  it('when a person answers in time, then the first-response clock stops with one metric row and no breach is recorded, while an unanswered thread breaches', async () => {
    const ws = await createWorkspace(server);
    await alwaysOpen(ws);
    await createPolicy(ws, { name: 'Cinco minutos', targets: { firstResponseMinutes: 5 } });
    const { data: person } = await ws.api.POST('/agents', { body: buildHuman({ name: 'Paula' }) });
    const answered = await sandboxInbound(ws, 'Oi', '+5511911112002');
    const waiting = await sandboxInbound(ws, 'Oi', '+5511911112003');
    const t = await thread(ws, answered.threadId);
    const { response } = await ws.api.POST('/messages', { body: { contactId: t.contactId, channelId: t.channelId, content: 'Olá!', agentId: person!.id } });
    expect(response.status).toBe(201);

    expect((await thread(ws, answered.threadId)).sla).toMatchObject({ firstResponseDueAt: null, status: 'achieved', breached: [] });
    const metrics = await server.db.selectFrom('sla_metrics').selectAll().where('workspace_id', '=', ws.workspaceId).execute();
    expect(metrics).toMatchObject([{ thread_id: answered.threadId, metric: 'firstResponse', agent_id: person!.id, by_ai: false, within_sla: true }]);
    const timers = await server.db
      .selectFrom('jobs')
      .select('ordering_key')
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'sla-timer')
      .execute();
    expect(timers.map((j) => j.ordering_key)).toEqual([`sla:${waiting.threadId}`]);

    await travel(server.db, ws, answered.threadId, 6 * 60_000);
    await travel(server.db, ws, waiting.threadId, 6 * 60_000);
    await waitFor('the unanswered thread to breach', async () => (await events(ws, 'sla.breached')).length > 0, 5_000);
    const breaches = await events(ws, 'sla.breached');
    expect(breaches.map((e) => (e.data.object as Schemas['Thread']).id)).toEqual([waiting.threadId]);
  });

  it('when an agent that is not a person is named on POST /messages, then 422 invalid_reference and nothing is sent', async () => {
    const ws = await createWorkspace(server);
    const { threadId } = await sandboxInbound(ws, 'Oi', '+5511911112004');
    const t = await thread(ws, threadId);
    const res = await request(server, 'POST', '/v1/messages', {
      apiKey: ws.apiKey,
      body: { contactId: t.contactId, channelId: t.channelId, content: 'Olá', agentId: uuidv7() },
    });
    expect(res.status).toBe(422);
    expect((res.body as Schemas['ErrorResponse']).error).toMatchObject({ code: 'invalid_reference', details: [{ path: '/body/agentId' }] });
    const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });
    expect(data!.data).toHaveLength(1);
  });

  it('when the service restarts while a clock runs, then the breach is recorded once after the restart', async () => {
    const second = databaseUrl ? await ownDatabase() : undefined;
    let first: TestServer | undefined = await startServer({ databaseUrl: second?.url, jobs: true, config: JOBS });
    let again: TestServer | undefined;
    try {
      const ws = await createWorkspace(first);
      await alwaysOpen(ws);
      await createPolicy(ws, { name: 'Dez minutos', targets: { firstResponseMinutes: 10 } });
      const { data } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
        params: { path: { id: ws.channels[0]!.id } },
        body: { from: '+5511911112005', content: 'Oi' },
      });
      const threadId = data!.threadId;
      await first.close();
      first = undefined;
      again = await startServer({ databaseUrl: second?.url, jobs: true, config: JOBS });
      await travel(again.db, ws, threadId, 11 * 60_000);
      const api = ws.api;
      void api;
      await waitFor(
        'the breach after the restart',
        async () =>
          (await sql<{ n: number }>`select count(*)::int as n from events where workspace_id = ${ws.workspaceId} and type = 'sla.breached'`.execute(again!.db))
            .rows[0]!.n === 1,
        5_000,
      );
      const clock = await again.db
        .selectFrom('sla_clocks')
        .selectAll()
        .where('thread_id', '=', threadId)
        .where('metric', '=', 'firstResponse')
        .executeTakeFirstOrThrow();
      expect(clock.breached).toBe(true);
    } finally {
      await first?.close();
      await again?.close();
      await second?.drop();
    }
  });
});

describe('who answers, and policies, change under running clocks', () => {
  /** When the thread's SLA timers are due (one timer per thread, at its clocks' earliest warning or due time still to record). */
  async function timers(ws: TestWorkspace, threadId: string): Promise<string[]> {
    const { rows } = await sql<{ run_at: Date }>`
      select run_at from jobs
       where workspace_id = ${ws.workspaceId} and queue = 'sla-timer' and ordering_key = ${`sla:${threadId}`} order by run_at`.execute(server.db);
    return rows.map((r) => r.run_at.toISOString());
  }

  it('when a thread opens under a policy due in minutes, then its one timer goes with the opening without waking the workers, an answer moves that same timer to the resolution warning, and a timer due at once wakes them', async () => {
    // A listener of the queue's own, as each instance's workers have.
    const listener = createJobListener({ db: server.db, databaseUrl: own?.url, logger: createLogger('silent') });
    const woken: string[] = [];
    listener.subscribe((queue) => woken.push(queue));
    try {
      if (own) await waitFor('the listener', () => woken.includes('*'), 5_000);
      const ws = await createWorkspace(server);
      await alwaysOpen(ws);
      await createPolicy(ws, { name: 'Quinze minutos', targets: { firstResponseMinutes: 15, resolutionMinutes: 600 }, warnBeforeMinutes: 5 });
      const { threadId } = await sandboxInbound(ws, 'Oi', '+5511911113010');
      const opened = await thread(ws, threadId);
      const at = (minutes: number) => new Date(Date.parse(opened.createdAt) + minutes * 60_000).toISOString();
      expect(await timers(ws, threadId)).toEqual([at(10)]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(woken.filter((queue) => queue === 'sla-timer')).toEqual([]);

      const ids = async () =>
        (
          await sql<{ id: string }>`select id from jobs where workspace_id = ${ws.workspaceId} and ordering_key = ${`sla:${threadId}`} order by id`.execute(
            server.db,
          )
        ).rows.map((row) => row.id);
      const timer = await ids();
      expect(timer).toHaveLength(1);
      const { response } = await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
      expect(response.status).toBe(201);
      expect(await timers(ws, threadId)).toEqual([at(595)]);
      expect(await ids()).toEqual(timer);

      const soon = await createWorkspace(server);
      await alwaysOpen(soon);
      await createPolicy(soon, { name: 'Um minuto', targets: { firstResponseMinutes: 1 }, warnBeforeMinutes: 1 });
      const startedAt = Date.now();
      await sandboxInbound(soon, 'Oi', '+5511911113011');
      await waitFor('the workers woken', () => woken.includes('sla-timer'), 5_000);
      await waitFor('the warning', async () => (await events(soon, 'sla.warning')).length === 1, 5_000);
      expect(Date.now() - startedAt).toBeLessThan(5_000);
    } finally {
      await listener.close();
    }
  });

  it('when the AI agent answering a thread is deleted, then its first-response clock starts again then (a handoff to people), with its timer; a person deleted changes nothing', async () => {
    const ws = await createWorkspace(server);
    await alwaysOpen(ws);
    await createPolicy(ws, { name: 'Dez minutos', targets: { firstResponseMinutes: 10 } });
    const { data: lia } = await ws.api.POST('/agents', { body: { name: 'Lia', instructions: 'Atenda.', model: 'gpt-4o-mini' } });
    const { data: paula } = await ws.api.POST('/agents', { body: buildHuman({ name: 'Paula' }) });
    const channelId = ws.channels[0]!.id;
    const patch = async (agentId: string | null) =>
      expect((await ws.api.PATCH('/channels/{id}', { params: { path: { id: channelId } }, body: { defaultAgentId: agentId } })).response.status).toBe(200);
    await patch(lia!.id);
    const byAi = await sandboxInbound(ws, 'Oi', '+5511911113001');
    await patch(paula!.id);
    const byPerson = await sandboxInbound(ws, 'Oi', '+5511911113002');
    const before = await thread(ws, byAi.threadId);
    const personBefore = await thread(ws, byPerson.threadId);
    expect(before.agentId).toBe(lia!.id);
    expect(before.sla!.firstResponseDueAt).toBe(new Date(Date.parse(before.createdAt) + 10 * 60_000).toISOString());

    await new Promise((resolve) => setTimeout(resolve, 50));
    const deletedAt = Date.now();
    expect((await ws.api.DELETE('/agents/{id}', { params: { path: { id: lia!.id } } })).response.status).toBe(204);
    const after = await thread(ws, byAi.threadId);
    expect(after.agentId).toBeNull();
    const due = Date.parse(after.sla!.firstResponseDueAt!);
    expect(due - 10 * 60_000).toBeGreaterThanOrEqual(deletedAt - 5);
    expect(due).toBeGreaterThan(Date.parse(before.sla!.firstResponseDueAt!));
    expect(await timers(ws, byAi.threadId)).toEqual([after.sla!.firstResponseDueAt]);
    // The thread.updated of the deletion carries the new clock.
    const updates = (await events(ws, 'thread.updated')).filter((e) => (e.data.object as Schemas['Thread']).id === byAi.threadId);
    expect((updates[0]!.data.object as Schemas['Thread']).sla).toMatchObject({ firstResponseDueAt: after.sla!.firstResponseDueAt });

    // A person answering now: the metric row counts from the deletion, not from the opening.
    const { response } = await ws.api.POST('/messages', { body: { contactId: after.contactId, channelId, content: 'Olá!', agentId: paula!.id } });
    expect(response.status).toBe(201);
    const metric = await server.db.selectFrom('sla_metrics').selectAll().where('thread_id', '=', byAi.threadId).executeTakeFirstOrThrow();
    expect(metric.started_at.getTime()).toBe(due - 10 * 60_000);

    expect((await ws.api.DELETE('/agents/{id}', { params: { path: { id: paula!.id } } })).response.status).toBe(204);
    expect((await thread(ws, byPerson.threadId)).sla).toEqual(personBefore.sla);
  });

  it("when a policy's target changes, then its running clocks' due times and timers move at once (into the past: a breach within 5 s); disabled or deleted, the next policy that applies holds them, or none", async () => {
    const ws = await createWorkspace(server);
    await alwaysOpen(ws);
    const hour = await createPolicy(ws, { name: 'Uma hora', targets: { firstResponseMinutes: 60 }, warnBeforeMinutes: 10 });
    const fallback = await createPolicy(ws, { name: 'Um dia', targets: { firstResponseMinutes: 1440, resolutionMinutes: 2880 } });
    const { threadId } = await sandboxInbound(ws, 'Oi', '+5511911113003');
    const opened = await thread(ws, threadId);
    const at = (minutes: number) => new Date(Date.parse(opened.createdAt) + minutes * 60_000).toISOString();
    expect(opened.sla).toMatchObject({ policyId: hour.id, firstResponseDueAt: at(60) });
    expect(await timers(ws, threadId)).toEqual([at(50)]);

    // A longer target: the due time and the timer (at the warning) move later, counting from the clock's start.
    const longer = await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: hour.id } }, body: { targets: { firstResponseMinutes: 120 } } });
    expect(longer.response.status).toBe(200);
    expect((await thread(ws, threadId)).sla).toMatchObject({ policyId: hour.id, firstResponseDueAt: at(120), status: 'active' });
    expect(await timers(ws, threadId)).toEqual([at(110)]);

    // Disabled: the next policy that applies holds the thread, from the same starts.
    const disabled = await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: hour.id } }, body: { enabled: false } });
    expect(disabled.response.status).toBe(200);
    expect((await thread(ws, threadId)).sla).toMatchObject({ policyId: fallback.id, firstResponseDueAt: at(1440), resolutionDueAt: at(2880) });
    expect(await timers(ws, threadId)).toEqual([at(1440)]);

    // A target already past: the breach is recorded within 5 s, once.
    const shorter = await ws.api.PATCH('/sla-policies/{id}', {
      params: { path: { id: fallback.id } },
      body: { targets: { firstResponseMinutes: 1, resolutionMinutes: 2880 } },
    });
    expect(shorter.response.status).toBe(200);
    if (Date.now() < Date.parse(at(1))) await travel(server.db, ws, threadId, Date.parse(at(1)) - Date.now());
    const clock = await server.db
      .selectFrom('sla_clocks')
      .selectAll()
      .where('thread_id', '=', threadId)
      .where('metric', '=', 'firstResponse')
      .executeTakeFirstOrThrow();
    await waitFor('the breach of the moved due time', async () => (await events(ws, 'sla.breached')).length === 1, 6_000);
    expect(Date.parse((await events(ws, 'sla.breached'))[0]!.createdAt) - clock.due_at!.getTime()).toBeLessThanOrEqual(5_000);
    expect((await thread(ws, threadId)).sla).toMatchObject({ policyId: fallback.id, status: 'breached', breached: ['firstResponse'] });

    // Deleted, with no other policy enabled: no due times, no timers, no sla; the clocks still run for the report.
    expect((await ws.api.DELETE('/sla-policies/{id}', { params: { path: { id: fallback.id } } })).response.status).toBe(204);
    expect((await thread(ws, threadId)).sla).toBeNull();
    expect(await timers(ws, threadId)).toEqual([]);
    const t = await thread(ws, threadId);
    expect((await ws.api.POST('/messages', { body: { contactId: t.contactId, channelId: t.channelId, content: 'Olá!' } })).response.status).toBe(201);
    const metric = await server.db.selectFrom('sla_metrics').selectAll().where('thread_id', '=', threadId).executeTakeFirstOrThrow();
    expect(metric).toMatchObject({ metric: 'firstResponse', policy_id: null, within_sla: null });
    expect((await events(ws, 'sla.breached')).length).toBe(1);
  });
});

describe('policies as the write paths see them', () => {
  it('when a policy is created, disabled, re-enabled or deleted, then a thread opened or regrouped right after follows it; a regroup to the same policy writes no clock, no sla and no timer', async () => {
    const ws = await createWorkspace(server);
    // No policy yet: the thread runs its clocks without due times (and the workspace's policies are now cached here).
    const before = await sandboxInbound(ws, 'Oi', '+5511911113001');
    expect((await thread(ws, before.threadId)).sla).toBeNull();
    const vip = await createPolicy(ws, {
      name: 'VIP',
      targets: { firstResponseMinutes: 30 },
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'vip' }] },
    });
    const all = await createPolicy(ws, { name: 'Todos', targets: { firstResponseMinutes: 60 } });
    const opened = await sandboxInbound(ws, 'Oi', '+5511911113002');
    expect((await thread(ws, opened.threadId)).sla).toMatchObject({ policyId: all.id, status: 'active' });

    const stored = async (threadId: string) => {
      const { rows } = await sql<{ clocks: string; sla: string; xmin: string; timers: string }>`
        select (select json_agg(json_build_object('m', metric, 'd', due_at, 'x', xmin::text) order by metric)::text from sla_clocks
                 where workspace_id = ${ws.workspaceId} and thread_id = ${threadId}) as clocks,
               t.sla::text as sla,
               (select string_agg(id::text, ',' order by id) from jobs where workspace_id = ${ws.workspaceId} and ordering_key = ${`sla:${threadId}`}) as timers
          from threads t where t.workspace_id = ${ws.workspaceId} and t.id = ${threadId}`.execute(server.db);
      return rows[0]!;
    };
    // A stage change and an unrelated label: the same policy, the same clocks: nothing of the SLA is written.
    const held = await stored(opened.threadId);
    const stage = (await ws.api.GET('/stages')).data!.data[1]!.id;
    expect((await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened.threadId } }, body: { stageId: stage } })).response.status).toBe(200);
    expect((await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened.threadId } }, body: { labels: ['pedido'] } })).response.status).toBe(200);
    expect(await stored(opened.threadId)).toEqual(held);
    // A label that the first policy matches: held to it now, its due time from the clock's start.
    const regrouped = await ws.api.PATCH('/threads/{id}', { params: { path: { id: opened.threadId } }, body: { labels: ['vip'] } });
    expect(regrouped.data!.sla).toMatchObject({ policyId: vip.id });
    expect(regrouped.data!.sla!.firstResponseDueAt).toBe(new Date(Date.parse((await thread(ws, opened.threadId)).createdAt) + 30 * 60_000).toISOString());

    // Disabled: the next thread opened is held to the other policy at once.
    expect((await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: all.id } }, body: { enabled: false } })).response.status).toBe(200);
    const afterDisable = await sandboxInbound(ws, 'Oi', '+5511911113003');
    expect((await thread(ws, afterDisable.threadId)).sla).toBeNull();
    expect((await ws.api.PATCH('/sla-policies/{id}', { params: { path: { id: all.id } }, body: { enabled: true } })).response.status).toBe(200);
    const afterEnable = await sandboxInbound(ws, 'Oi', '+5511911113004');
    expect((await thread(ws, afterEnable.threadId)).sla).toMatchObject({ policyId: all.id });
    expect((await ws.api.DELETE('/sla-policies/{id}', { params: { path: { id: all.id } } })).response.status).toBe(204);
    const afterDelete = await sandboxInbound(ws, 'Oi', '+5511911113005');
    expect((await thread(ws, afterDelete.threadId)).sla).toBeNull();
  });
});

describe('policies without conditions, and conditions on the hour', () => {
  it('when the first policy has no conditions, then it holds for every thread; when one asks whether it is business hours, then it holds in them and not outside', async () => {
    const open = await createWorkspace(server);
    await alwaysOpen(open);
    const closed = await createWorkspace(server);
    const never: [string, string][] = [];
    const { response } = await closed.api.PATCH('/settings', {
      body: { timezone: 'UTC', businessHours: { mon: never, tue: never, wed: never, thu: never, fri: never, sat: never, sun: never } },
    });
    expect(response.status).toBe(200);
    const policies = new Map<string, [Policy, Policy]>();
    for (const ws of [open, closed]) {
      const inHours = await createPolicy(ws, {
        name: 'No expediente',
        targets: { firstResponseMinutes: 30 },
        conditions: { all: [{ field: 'time.businessHours', operator: 'equals', value: true }] },
      });
      const everyone = await createPolicy(ws, { name: 'Todos', targets: { firstResponseMinutes: 60 } });
      policies.set(ws.workspaceId, [inHours, everyone]);
    }
    const inOpen = await sandboxInbound(open, 'Oi', '+5511911115001');
    const inClosed = await sandboxInbound(closed, 'Oi', '+5511911115002');
    expect((await thread(open, inOpen.threadId)).sla).toMatchObject({ policyId: policies.get(open.workspaceId)![0].id });
    expect((await thread(closed, inClosed.threadId)).sla).toMatchObject({ policyId: policies.get(closed.workspaceId)![1].id });

    // The policy without conditions moved first: it holds for every thread, in hours or not.
    const [, everyone] = policies.get(open.workspaceId)!;
    expect((await open.api.PATCH('/sla-policies/{id}', { params: { path: { id: everyone.id } }, body: { position: 1 } })).response.status).toBe(200);
    const first = await sandboxInbound(open, 'Oi', '+5511911115003');
    expect((await thread(open, first.threadId)).sla).toMatchObject({ policyId: everyone.id });
  });
});

describe('GET /reports/response-times', () => {
  /** Seeds metric rows as the clocks write them: [metric, seconds, agent, byAi, within]. */
  async function seed(ws: TestWorkspace, rows: Array<[Schemas['SlaMetric'], number, string | null, boolean | null, boolean | null, string]>): Promise<void> {
    const channelId = ws.channels[0]!.id;
    await server.db
      .insertInto('sla_metrics')
      .values(
        rows.map(([metric, seconds, agentId, byAi, within, at]) => ({
          workspace_id: ws.workspaceId,
          id: uuidv7(),
          thread_id: uuidv7(),
          metric,
          channel_id: channelId,
          stage_id: null,
          agent_id: agentId,
          by_ai: byAi,
          started_at: new Date(Date.parse(at) - seconds * 1000),
          happened_at: new Date(at),
          seconds,
          business_seconds: seconds / 2,
          policy_id: null,
          due_at: within === null ? null : new Date(at),
          within_sla: within,
        })),
      )
      .execute();
  }

  it('when responses and closings happened in the window, then count, mean, p50, p90, byAi/byHuman and % within SLA are the hand-computed ones, by agent and by day', async () => {
    const ws = await createWorkspace(server);
    const ana = uuidv7();
    await seed(ws, [
      ['firstResponse', 60, ana, false, true, '2026-11-10T12:00:00.000Z'],
      ['firstResponse', 120, ana, false, false, '2026-11-10T13:00:00.000Z'],
      ['firstResponse', 300, null, true, true, '2026-11-11T12:00:00.000Z'],
      ['firstResponse', 600, ana, false, true, '2026-11-11T13:00:00.000Z'],
      ['nextResponse', 30, ana, null, null, '2026-11-11T14:00:00.000Z'],
      ['resolution', 7200, ana, null, false, '2026-11-11T15:00:00.000Z'],
      ['firstResponse', 9999, ana, false, true, '2026-12-01T12:00:00.000Z'],
    ]);
    const query = '?dateFrom=2026-11-01T00:00:00Z&dateTo=2026-11-30T23:59:59.999Z';
    const res = await request(server, 'GET', `/v1/reports/response-times${query}&groupBy=agent`, { apiKey: ws.apiKey });
    expect(res.status).toBe(200);
    // First responses 60, 120, 300, 600: mean 270; p50 = (120+300)/2 = 210; p90 = 300 + 0.7 x 300 = 510.
    // Within SLA: 3 of the 5 timed (4 first responses, 1 resolution) = 60%.
    const total = {
      firstResponse: { count: 4, meanSeconds: 270, p50Seconds: 210, p90Seconds: 510, byAi: 1, byHuman: 3 },
      nextResponse: { count: 1, meanSeconds: 30, p50Seconds: 30, p90Seconds: 30 },
      resolution: { count: 1, meanSeconds: 7200, p50Seconds: 7200, p90Seconds: 7200 },
      slaAchievedPercent: 60,
    };
    expect(res.body).toEqual({
      data: [
        {
          key: ana,
          // 60, 120, 600: mean 260, p50 120, p90 = 120 + 0.8 x 480 = 504; within 2 of 4 timed = 50%.
          firstResponse: { count: 3, meanSeconds: 260, p50Seconds: 120, p90Seconds: 504, byAi: 0, byHuman: 3 },
          nextResponse: total.nextResponse,
          resolution: total.resolution,
          slaAchievedPercent: 50,
        },
        {
          key: null,
          firstResponse: { count: 1, meanSeconds: 300, p50Seconds: 300, p90Seconds: 300, byAi: 1, byHuman: 0 },
          nextResponse: { count: 0, meanSeconds: null, p50Seconds: null, p90Seconds: null },
          resolution: { count: 0, meanSeconds: null, p50Seconds: null, p90Seconds: null },
          slaAchievedPercent: 100,
        },
      ],
      total,
    });
    const hours = await request(server, 'GET', `/v1/reports/response-times${query}&businessHours=true`, { apiKey: ws.apiKey });
    expect((hours.body as Schemas['ResponseTimesReport']).total.firstResponse).toEqual({
      count: 4,
      meanSeconds: 135,
      p50Seconds: 105,
      p90Seconds: 255,
      byAi: 1,
      byHuman: 3,
    });
    expect((hours.body as Schemas['ResponseTimesReport']).data).toEqual([]);
    // Days in the workspace's zone (America/Sao_Paulo, UTC-3): 12:00Z and 13:00Z are the same local day.
    const days = await request(server, 'GET', `/v1/reports/response-times${query}&groupBy=day`, { apiKey: ws.apiKey });
    expect((days.body as Schemas['ResponseTimesReport']).data.map((g) => [g.key, g.firstResponse.count])).toEqual([
      ['2026-11-10', 2],
      ['2026-11-11', 2],
    ]);
  });

  it('when the window holds more responses than are read one by one, then whole ended days come from the rollups: counts, means and % exact, percentiles within 2 %, and each whole day of groupBy=day exact', async () => {
    const ws = await createWorkspace(server);
    const ana = uuidv7();
    const rows: Array<[Schemas['SlaMetric'], number, string | null, boolean | null, boolean | null, string]> = [];
    for (let i = 0; i < 300; i++) {
      const day = 1 + (i % 20);
      const at = `2026-10-${String(day).padStart(2, '0')}T${String(10 + (i % 12)).padStart(2, '0')}:00:00.000Z`;
      const metric = (['firstResponse', 'nextResponse', 'resolution'] as const)[i % 3]!;
      rows.push([
        metric,
        0.5 + ((i * 7919) % 5000),
        i % 4 === 0 ? null : ana,
        metric === 'firstResponse' ? i % 2 === 0 : null,
        i % 5 === 0 ? null : i % 3 === 0,
        at,
      ]);
    }
    await seed(ws, rows);
    // The window starts and ends mid-day: those part days are read from the metric rows.
    const window = { from: '2026-10-03T12:00:00.000Z', to: '2026-10-18T15:30:00.000Z' };
    for (const groupBy of [undefined, 'agent', 'channel', 'stage', 'day'] as const) {
      for (const businessHours of [false, true]) {
        const exact = await responseTimes(server.db, ws.workspaceId, window, { groupBy, businessHours, exactUpTo: Number.MAX_SAFE_INTEGER });
        const rolled = await responseTimes(server.db, ws.workspaceId, window, { groupBy, businessHours, exactUpTo: 0 });
        const close = (a: number | null, b: number | null) => a === b || (a !== null && b !== null && Math.abs(a - b) <= 0.02 * b + 0.02);
        const pairs = [[rolled.total, exact.total], ...exact.data.map((g, i) => [rolled.data[i]!, g])] as const;
        expect(rolled.data.map((g) => g.key)).toEqual(exact.data.map((g) => g.key));
        for (const [a, b] of pairs) {
          expect(a.slaAchievedPercent).toBe(b.slaAchievedPercent);
          expect([a.firstResponse.byAi, a.firstResponse.byHuman]).toEqual([b.firstResponse.byAi, b.firstResponse.byHuman]);
          for (const metric of ['firstResponse', 'nextResponse', 'resolution'] as const) {
            expect(a[metric].count).toBe(b[metric].count);
            expect(Math.abs(a[metric].meanSeconds! - b[metric].meanSeconds!)).toBeLessThan(0.002);
            expect(close(a[metric].p50Seconds, b[metric].p50Seconds), `${groupBy} ${metric} p50 ${a[metric].p50Seconds} vs ${b[metric].p50Seconds}`).toBe(true);
            expect(close(a[metric].p90Seconds, b[metric].p90Seconds), `${groupBy} ${metric} p90 ${a[metric].p90Seconds} vs ${b[metric].p90Seconds}`).toBe(true);
          }
        }
        if (groupBy === 'day') expect(rolled.data).toEqual(exact.data);
      }
    }
  });

  it('when groupBy is unknown, dateFrom is after dateTo, or the window is over 366 days, then 400 with the error shape', async () => {
    const ws = await createWorkspace(server);
    const cases: Array<[string, string]> = [
      ['?dateFrom=2026-11-01T00:00:00Z&dateTo=2026-11-02T00:00:00Z&groupBy=contact', '/query/groupBy'],
      ['?dateFrom=2026-11-03T00:00:00Z&dateTo=2026-11-02T00:00:00Z', '/query/dateFrom'],
      ['?dateFrom=2025-01-01T00:00:00Z&dateTo=2026-01-02T00:00:01Z', '/query/dateTo'],
      ['?dateTo=2026-11-02T00:00:00Z', '/query/dateFrom'],
    ];
    for (const [query, path] of cases) {
      const res = await request(server, 'GET', `/v1/reports/response-times${query}`, { apiKey: ws.apiKey });
      expect(res.status, query).toBe(400);
      const error = (res.body as Schemas['ErrorResponse']).error;
      expect(error.code).toBe('validation_error');
      expect(error.details?.map((d) => d.path)).toContain(path);
    }
    const ok = await request(server, 'GET', '/v1/reports/response-times?dateFrom=2025-01-01T00:00:00Z&dateTo=2026-01-02T00:00:00Z', { apiKey: ws.apiKey });
    expect(ok.status).toBe(200);
  });
});
