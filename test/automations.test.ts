// Automations as a resource (issue 22, part 1): create, list in position order, change, move (the
// others shift), delete; the limits; every refusal (contract 400s, conditions and actions that do
// not fit, references the workspace lacks) storing nothing; scopes; another workspace's
// automations; and the dry run, which explains and changes nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildAgent, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { refunds, stageId } from './helpers/automations.js';
import { startServer, type TestServer } from './helpers/server.js';

type Automation = components['schemas']['Automation'];
type AutomationCreate = components['schemas']['AutomationCreate'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

/** The README's second worked example. */
const closeWhenSilent: AutomationCreate = {
  name: 'Encerrar após 3 dias sem resposta',
  trigger: { event: 'thread.idle', minutes: 4320, waitingOn: 'customer' },
  actions: [{ type: 'set_status', status: 'closed' }],
};

const named = (name: string): AutomationCreate => ({ ...closeWhenSilent, name });

async function create(ws: TestWorkspace, body: AutomationCreate): Promise<Automation> {
  const { data, response } = await ws.api.POST('/automations', { body });
  expect(response.status).toBe(201);
  return data!;
}

async function listed(ws: TestWorkspace): Promise<Automation[]> {
  const { data } = await ws.api.GET('/automations', { params: { query: { limit: 100 } } });
  return data!.data;
}

const namesOf = async (ws: TestWorkspace): Promise<string[]> => (await listed(ws)).map((a) => `${a.position} ${a.name}`);

describe('POST /automations', () => {
  it('when the README examples are created, then each answers 201 whole, enabled, the next position, and lists as created', async () => {
    const ws = await createWorkspace(server);
    const emAtendimento = await stageId(ws, 'Em atendimento');

    const first = await create(ws, refunds(emAtendimento));
    const second = await create(ws, closeWhenSilent);

    expect(first).toEqual({
      id: expect.stringMatching(UUID),
      ...refunds(emAtendimento),
      enabled: true,
      position: 1,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: first.createdAt,
    });
    expect(second).toEqual({
      ...closeWhenSilent,
      id: expect.stringMatching(UUID),
      enabled: true,
      position: 2,
      conditions: {},
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: second.createdAt,
    });
    const { data } = await ws.api.GET('/automations');
    expect(data).toEqual({ data: [first, second], pagination: { total: 2, page: 1, limit: 20 } });
    const { data: one } = await ws.api.GET('/automations/{id}', { params: { path: { id: first.id } } });
    expect(one).toEqual(first);
  });

  it('when a position is named, then it goes there and the later ones move down; past the last place is a 400', async () => {
    const ws = await createWorkspace(server);
    for (const name of ['A', 'B', 'C']) await create(ws, named(name));

    await create(ws, { ...named('X'), position: 2, enabled: false });
    const { response, error } = await ws.api.POST('/automations', { body: { ...named('Y'), position: 6 } });

    expect(await namesOf(ws)).toEqual(['1 A', '2 X', '3 B', '4 C']);
    expect((await listed(ws)).find((a) => a.name === 'X')!.enabled).toBe(false);
    expect(response.status).toBe(400);
    expect(error!.error).toMatchObject({ code: 'validation_error', details: [{ path: '/body/position', message: 'must be from 1 to 5' }] });
  });

  it('when ten are created at once, then their positions are 1 to 10 without gaps or repeats', async () => {
    const ws = await createWorkspace(server);

    const made = await Promise.all(Array.from({ length: 10 }, (_, i) => create(ws, named(`R${i}`))));

    expect(made.map((a) => a.position).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect((await listed(ws)).map((a) => a.position)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('when the workspace has 100, then the 101st is a 422 limit_reached and nothing is stored; after a delete one fits again', async () => {
    const ws = await createWorkspace(server);
    for (let i = 0; i < 10; i++) await Promise.all(Array.from({ length: 10 }, (_, j) => create(ws, named(`N${i * 10 + j}`))));

    const { response, error } = await ws.api.POST('/automations', { body: { ...named('Uma a mais'), position: 1 } });

    expect(response.status).toBe(422);
    expect(error!.error).toMatchObject({ code: 'limit_reached', message: 'A workspace has at most 100 automations; delete one first.' });
    const { data } = await ws.api.GET('/automations', { params: { query: { limit: 1 } } });
    expect(data!.pagination.total).toBe(100);
    expect(data!.data[0]!.name).not.toBe('Uma a mais');
    await ws.api.DELETE('/automations/{id}', { params: { path: { id: data!.data[0]!.id } } });
    expect((await ws.api.POST('/automations', { body: named('Cabe') })).response.status).toBe(201);
  });
});

describe('refusals store nothing', () => {
  let ws: TestWorkspace;
  let emAtendimento: string;
  beforeAll(async () => {
    ws = await createWorkspace(server);
    emAtendimento = await stageId(ws, 'Em atendimento');
  });

  const post = (body: unknown) => request(server, 'POST', '/v1/automations', { apiKey: ws.apiKey, body });

  it.each([
    ['an unknown trigger event', { trigger: { event: 'message.deleted' } }, '/body/trigger/event'],
    ['a trigger without its event', { trigger: { minutes: 10 } }, '/body/trigger/event'],
    ['an idle trigger without waitingOn', { trigger: { event: 'thread.idle', minutes: 10 } }, '/body/trigger/waitingOn'],
    ['an idle trigger of 30 days and a minute', { trigger: { event: 'thread.idle', minutes: 43201, waitingOn: 'agent' } }, '/body/trigger/minutes'],
    ['an unknown action type', { actions: [{ type: 'delete_thread' }] }, '/body/actions/0/type'],
    ['a move without its stage', { actions: [{ type: 'move_stage' }] }, '/body/actions/0/stageId'],
    ['eleven actions', { actions: Array(11).fill({ type: 'stop' }) }, '/body/actions'],
    ['no action', { actions: [] }, '/body/actions'],
    ['an unknown field', { conditions: { all: [{ field: 'thread.priority', operator: 'equals', value: 'x' }] } }, '/body/conditions/all/0/field'],
    ['an unknown operator', { conditions: { all: [{ field: 'thread.status', operator: 'matches', value: 'x' }] } }, '/body/conditions/all/0/operator'],
    ['an empty any', { conditions: { any: [] } }, '/body/conditions/any'],
    ['21 conditions', { conditions: { all: Array(21).fill({ field: 'thread.labels', operator: 'is_set' }) } }, '/body/conditions/all'],
    [
      '11 + 10 conditions',
      {
        conditions: {
          all: Array(11).fill({ field: 'thread.labels', operator: 'is_set' }),
          any: Array(10).fill({ field: 'thread.labels', operator: 'is_set' }),
        },
      },
      '/body/conditions',
    ],
    ['gt on labels', { conditions: { all: [{ field: 'thread.labels', operator: 'gt', value: 2 }] } }, '/body/conditions/all/0/operator'],
    [
      'contains on a boolean',
      { conditions: { all: [{ field: 'time.businessHours', operator: 'contains', value: 'sim' }] } },
      '/body/conditions/all/0/operator',
    ],
    [
      'a value of the wrong type',
      { conditions: { all: [{ field: 'time.businessHours', operator: 'equals', value: 'true' }] } },
      '/body/conditions/all/0/value',
    ],
    ['is_set with a value', { conditions: { all: [{ field: 'thread.agentId', operator: 'is_set', value: 'x' }] } }, '/body/conditions/all/0/value'],
    [
      'message.* on a timer',
      {
        trigger: { event: 'thread.idle', minutes: 60, waitingOn: 'agent' },
        conditions: { all: [{ field: 'message.content', operator: 'contains', value: 'oi' }] },
      },
      '/body/conditions/all/0/field',
    ],
    [
      'nps.score outside nps.answered',
      { trigger: { event: 'thread.updated' }, conditions: { any: [{ field: 'nps.score', operator: 'lte', value: 6 }] } },
      '/body/conditions/any/0/field',
    ],
    ['a thread action on contact.created', { trigger: { event: 'contact.created' }, actions: [{ type: 'assign_round_robin' }] }, '/body/actions/0/type'],
  ])('when %s, then 400 validation_error naming it', async (_what, change, path) => {
    const res = await post({ ...named('Recusada'), ...change });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    expect(await listed(ws)).toEqual([]);
  });

  it('when an unknown trigger event is sent, then the one detail says which events there are', async () => {
    const res = await post({ ...named('Recusada'), trigger: { event: 'message.deleted' } });

    expect(res.body.error.details).toEqual([
      {
        path: '/body/trigger/event',
        message:
          'must be one of contact.created, thread.created, thread.updated, message.received, message.sent, nps.answered, sla.warning, sla.breached, thread.idle',
      },
    ]);
  });

  it('when conditions and actions name stages, agents and channels the workspace lacks, then 422 invalid_reference names each, and nothing is stored', async () => {
    const other = await createWorkspace(server);
    const foreignStage = await stageId(other, 'Novo');
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });

    const res = await post({
      ...named('Recusada'),
      trigger: { event: 'thread.created' },
      conditions: {
        all: [
          { field: 'thread.channelId', operator: 'in', value: [ws.channels[0]!.id, other.channels[0]!.id] },
          { field: 'thread.agentId', operator: 'equals', value: agent!.id.toUpperCase() },
        ],
      },
      actions: [
        { type: 'move_stage', stageId: foreignStage },
        { type: 'assign_agent', agentId: randomUUID() },
        { type: 'move_stage', stageId: emAtendimento },
      ],
    });

    expect(res.status).toBe(422);
    expect(res.body.error).toEqual({
      code: 'invalid_reference',
      message: 'The channel, stage, agent do not exist.',
      requestId: expect.any(String),
      details: [
        { path: '/body/conditions/all/0/value/1', message: 'no channel with this id' },
        { path: '/body/actions/0/stageId', message: 'no stage with this id' },
        { path: '/body/actions/1/agentId', message: 'no agent with this id' },
      ],
    });
    expect(await listed(ws)).toEqual([]);
  });
});

describe('PATCH /automations/{id}', () => {
  it('when moved, then the ones in between shift by one, both ways; past the last is a 400', async () => {
    const ws = await createWorkspace(server);
    const made: Automation[] = [];
    for (const name of ['A', 'B', 'C', 'D']) made.push(await create(ws, named(name)));

    await ws.api.PATCH('/automations/{id}', { params: { path: { id: made[0]!.id } }, body: { position: 3 } });
    expect(await namesOf(ws)).toEqual(['1 B', '2 C', '3 A', '4 D']);
    await ws.api.PATCH('/automations/{id}', { params: { path: { id: made[3]!.id } }, body: { position: 1 } });
    expect(await namesOf(ws)).toEqual(['1 D', '2 B', '3 C', '4 A']);
    const { response } = await ws.api.PATCH('/automations/{id}', { params: { path: { id: made[3]!.id } }, body: { position: 5 } });
    expect(response.status).toBe(400);
    expect(await namesOf(ws)).toEqual(['1 D', '2 B', '3 C', '4 A']);
  });

  it('when two moves race, then the positions stay 1 to n', async () => {
    const ws = await createWorkspace(server);
    const made: Automation[] = [];
    for (const name of ['A', 'B', 'C', 'D', 'E']) made.push(await create(ws, named(name)));

    await Promise.all(made.map((a, i) => ws.api.PATCH('/automations/{id}', { params: { path: { id: a.id } }, body: { position: 5 - i } })));

    expect((await listed(ws)).map((a) => a.position)).toEqual([1, 2, 3, 4, 5]);
  });

  it('when fields change, then only they do, conditions and actions replaced whole, updatedAt moved', async () => {
    const ws = await createWorkspace(server);
    const emAtendimento = await stageId(ws, 'Em atendimento');
    const before = await create(ws, refunds(emAtendimento));

    const { data: after } = await ws.api.PATCH('/automations/{id}', {
      params: { path: { id: before.id } },
      body: { name: 'Reembolsos', enabled: false, conditions: { all: [{ field: 'message.content', operator: 'starts_with', value: 'reembolso' }] } },
    });

    expect(after).toEqual({
      ...before,
      name: 'Reembolsos',
      enabled: false,
      conditions: { all: [{ field: 'message.content', operator: 'starts_with', value: 'reembolso' }] },
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect(after!.updatedAt >= before.updatedAt).toBe(true);
  });

  it('when a new trigger no longer fits the stored conditions, then 400 names them and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const before = await create(ws, refunds(await stageId(ws, 'Em atendimento')));

    const { response, error } = await ws.api.PATCH('/automations/{id}', {
      params: { path: { id: before.id } },
      body: { trigger: { event: 'contact.created' } },
    });

    expect(response.status).toBe(400);
    expect(error!.error.details!.map((d) => d.path)).toEqual([
      '/body/conditions/any/0/field',
      '/body/conditions/any/1/field',
      '/body/actions/0/type',
      '/body/actions/1/type',
    ]);
    expect(await listed(ws)).toEqual([before]);
  });

  it('when an action names a stage of another workspace, then 422 and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const before = await create(ws, closeWhenSilent);

    const { response, error } = await ws.api.PATCH('/automations/{id}', {
      params: { path: { id: before.id } },
      body: { actions: [{ type: 'move_stage', stageId: await stageId(other, 'Resolvido') }] },
    });

    expect(response.status).toBe(422);
    expect(error!.error.details).toEqual([{ path: '/body/actions/0/stageId', message: 'no stage with this id' }]);
    expect(await listed(ws)).toEqual([before]);
  });
});

describe('DELETE /automations/{id}', () => {
  it('when deleted, then it is gone (404 after) and the later ones move up', async () => {
    const ws = await createWorkspace(server);
    const made: Automation[] = [];
    for (const name of ['A', 'B', 'C']) made.push(await create(ws, named(name)));

    const { response } = await ws.api.DELETE('/automations/{id}', { params: { path: { id: made[0]!.id } } });

    expect(response.status).toBe(204);
    expect(await namesOf(ws)).toEqual(['1 B', '2 C']);
    expect((await ws.api.GET('/automations/{id}', { params: { path: { id: made[0]!.id } } })).response.status).toBe(404);
    expect((await ws.api.DELETE('/automations/{id}', { params: { path: { id: made[0]!.id } } })).response.status).toBe(404);
  });
});

describe('scopes and workspaces', () => {
  it('when a key lacks the scope, then 403 names it: write does not imply read, and the dry run needs read', async () => {
    const owner = await createWorkspace(server);
    const made = await create(owner, closeWhenSilent);
    const reader = await createWorkspace(server, { workspaceId: owner.workspaceId, scopes: ['automations:read'] });
    const writer = await createWorkspace(server, { workspaceId: owner.workspaceId, scopes: ['automations:write'] });

    const denied = [
      await reader.api.POST('/automations', { body: closeWhenSilent }),
      await reader.api.PATCH('/automations/{id}', { params: { path: { id: made.id } }, body: { enabled: false } }),
      await reader.api.DELETE('/automations/{id}', { params: { path: { id: made.id } } }),
      await writer.api.GET('/automations'),
      await writer.api.GET('/automations/{id}', { params: { path: { id: made.id } } }),
      await writer.api.POST('/automations/{id}/test', { params: { path: { id: made.id } }, body: { threadId: randomUUID() } }),
    ];

    expect(denied.map((r) => [r.response.status, r.error?.error.message])).toEqual([
      [403, 'This API key lacks the scope automations:write.'],
      [403, 'This API key lacks the scope automations:write.'],
      [403, 'This API key lacks the scope automations:write.'],
      [403, 'This API key lacks the scope automations:read.'],
      [403, 'This API key lacks the scope automations:read.'],
      [403, 'This API key lacks the scope automations:read.'],
    ]);
    expect((await reader.api.GET('/automations')).data!.data).toEqual([made]);
  });

  it("when another workspace's automation is named, then it does not exist (404), and lists never show it", async () => {
    const owner = await createWorkspace(server);
    const stranger = await createWorkspace(server);
    const made = await create(owner, closeWhenSilent);
    const path = { params: { path: { id: made.id } } };

    const answers = [
      await stranger.api.GET('/automations/{id}', path),
      await stranger.api.PATCH('/automations/{id}', { ...path, body: { name: 'Minha' } }),
      await stranger.api.DELETE('/automations/{id}', path),
      await stranger.api.POST('/automations/{id}/test', { ...path, body: { threadId: randomUUID() } }),
    ];

    expect(answers.map((a) => [a.response.status, a.error?.error.message])).toEqual(Array(4).fill([404, 'Automation not found.']));
    expect(await listed(stranger)).toEqual([]);
    expect(await listed(owner)).toEqual([made]);
  });
});

describe('POST /automations/{id}/test', () => {
  it('when the customer wrote about a refund, then the README example matches, explains each condition, says what each action would do, and changes nothing', async () => {
    const ws = await createWorkspace(server);
    const emAtendimento = await stageId(ws, 'Em atendimento');
    const automation = await create(ws, { ...refunds(emAtendimento), enabled: false });
    const { data: inbound } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: ws.channels[0]!.id } },
      body: { from: '+5511987654321', name: 'Mariana Silva', content: 'NÃO recebi o pedido, quero um REEMBOLSO' },
    });
    const { data: before } = await ws.api.GET('/threads/{id}', { params: { path: { id: inbound!.threadId } } });

    const { data, response } = await ws.api.POST('/automations/{id}/test', { params: { path: { id: automation.id } }, body: { threadId: inbound!.threadId } });

    expect(response.status).toBe(200);
    expect(data).toEqual({
      matched: true,
      conditions: [
        { field: 'message.content', operator: 'contains', value: 'reembolso', actual: 'NÃO recebi o pedido, quero um REEMBOLSO', result: true },
        { field: 'message.content', operator: 'contains', value: 'estorno', actual: 'NÃO recebi o pedido, quero um REEMBOLSO', result: false },
      ],
      actions: [
        { type: 'move_stage', wouldDo: 'move the thread from stage Novo to stage Em atendimento' },
        { type: 'add_labels', wouldDo: 'add the labels "reembolso" to the thread' },
      ],
    });
    expect((await ws.api.GET('/threads/{id}', { params: { path: { id: inbound!.threadId } } })).data).toEqual(before);
    expect((await ws.api.GET('/threads/{id}/history', { params: { path: { id: inbound!.threadId } } })).data!.pagination.total).toBe(2);
  });

  it('when the thread is already where the actions lead, then the dry run says so; conditions on the thread explain its values', async () => {
    const ws = await createWorkspace(server);
    const novo = await stageId(ws, 'Novo');
    const automation = await create(ws, {
      ...closeWhenSilent,
      conditions: {
        all: [
          { field: 'thread.stageId', operator: 'equals', value: novo },
          { field: 'channel.type', operator: 'equals', value: 'instagram' },
        ],
      },
      actions: [{ type: 'move_stage', stageId: novo }, { type: 'unassign' }, { type: 'set_status', status: 'open' }, { type: 'stop' }],
    });
    const { data: inbound } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: ws.channels[0]!.id } },
      body: { from: '+5511912345678', content: 'Oi' },
    });

    const { data } = await ws.api.POST('/automations/{id}/test', { params: { path: { id: automation.id } }, body: { threadId: inbound!.threadId } });

    expect(data).toEqual({
      matched: false,
      conditions: [
        { field: 'thread.stageId', operator: 'equals', value: novo, actual: novo, result: true },
        { field: 'channel.type', operator: 'equals', value: 'instagram', actual: 'whatsapp', result: false },
      ],
      actions: [
        { type: 'move_stage', wouldDo: 'nothing: the thread is already in stage Novo' },
        { type: 'unassign', wouldDo: 'nothing: the thread is not assigned' },
        { type: 'set_status', wouldDo: 'nothing: the thread is already open' },
        { type: 'stop', wouldDo: 'stop: no later automation runs for this event' },
      ],
    });
  });

  it("when the thread is another workspace's or none, then 422 invalid_reference at /body/threadId", async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const automation = await create(ws, closeWhenSilent);
    const { data: inbound } = await other.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: other.channels[0]!.id } },
      body: { from: '+5511987654321', content: 'Oi' },
    });

    for (const threadId of [inbound!.threadId, randomUUID()]) {
      const { response, error } = await ws.api.POST('/automations/{id}/test', { params: { path: { id: automation.id } }, body: { threadId } });
      expect(response.status).toBe(422);
      expect(error!.error).toMatchObject({ code: 'invalid_reference', details: [{ path: '/body/threadId', message: 'no thread with this id' }] });
    }
  });
});

describe('AUTOMATION_CONCURRENCY', () => {
  it('when it is read, then unset is the documented 8, a number sets it, and anything outside 1..1000 is refused', () => {
    expect(loadConfig({}).automationConcurrency).toBe(8);
    expect(loadConfig({ AUTOMATION_CONCURRENCY: '2' }).automationConcurrency).toBe(2);
    expect(() => loadConfig({ AUTOMATION_CONCURRENCY: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ AUTOMATION_CONCURRENCY: 'many' })).toThrow(ConfigError);
  });
});
