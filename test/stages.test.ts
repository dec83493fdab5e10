// The funnel's stages: the four every workspace starts with, adding, renaming, moving (the others
// shift), deleting (not while a thread is in it, not the only one), and another workspace's stages.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { DEFAULT_STAGES } from '../src/provisioning.js';
import { buildContact, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Stage = components['schemas']['Stage'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function stagesOf(ws: TestWorkspace): Promise<Stage[]> {
  const { data } = await ws.api.GET('/stages', { params: { query: { limit: 100 } } });
  return data!.data;
}

const namesOf = async (ws: TestWorkspace): Promise<string[]> => (await stagesOf(ws)).map((s) => s.name);

/** Positions must read 1, 2, 3, ... in list order. */
function expectDense(stages: Stage[]): void {
  expect(stages.map((s) => s.position)).toEqual(stages.map((_, i) => i + 1));
}

async function openThreadIn(ws: TestWorkspace, stageId: string): Promise<string> {
  const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
  const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });
  const { response } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { stageId } });
  expect(response.status).toBe(200);
  return thread!.id;
}

describe('GET /stages', () => {
  it('when the workspace is new, then it lists Novo, Em atendimento, Aguardando cliente and Resolvido in that order', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await ws.api.GET('/stages');

    expect(response.status).toBe(200);
    expect(DEFAULT_STAGES).toEqual(['Novo', 'Em atendimento', 'Aguardando cliente', 'Resolvido']);
    expect(data).toEqual({
      data: DEFAULT_STAGES.map((name, i) => ({
        id: expect.stringMatching(UUID),
        name,
        position: i + 1,
        createdAt: expect.stringMatching(ISO_MS),
        updatedAt: expect.stringMatching(ISO_MS),
      })),
      pagination: { total: 4, page: 1, limit: 20 },
    });
  });

  it('when paged by 3, then the second page holds the fourth stage', async () => {
    const ws = await createWorkspace(server);
    const all = await stagesOf(ws);

    const { data } = await ws.api.GET('/stages', { params: { query: { page: 2, limit: 3 } } });

    expect(data).toEqual({ data: [all[3]], pagination: { total: 4, page: 2, limit: 3 } });
  });

  it('when another workspace changes its funnel, then this one’s is unchanged', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const before = await stagesOf(ws);

    await other.api.POST('/stages', { body: { name: 'Outro', position: 1 } });

    expect(await stagesOf(ws)).toEqual(before);
  });
});

describe('POST /stages', () => {
  it('when no position is given, then the stage is added last', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await ws.api.POST('/stages', { body: { name: 'Pós-venda' } });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      name: 'Pós-venda',
      position: 5,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: data!.createdAt,
    });
    expect((await stagesOf(ws)).at(-1)).toEqual(data);
  });

  it('when position 2 is given, then the stage is inserted there and the later ones move down', async () => {
    const ws = await createWorkspace(server);
    const before = await stagesOf(ws);

    const { data } = await ws.api.POST('/stages', { body: { name: 'Triagem', position: 2 } });

    const after = await stagesOf(ws);
    expect(after.map((s) => s.name)).toEqual(['Novo', 'Triagem', 'Em atendimento', 'Aguardando cliente', 'Resolvido']);
    expectDense(after);
    expect(after[0]).toEqual(before[0]);
    expect(after.slice(2).map((s) => s.id)).toEqual(before.slice(1).map((s) => s.id));
    expect(after[1]).toEqual(data);
  });

  it('when position is one past the last, then it is added last; two past, then 400 naming the range', async () => {
    const ws = await createWorkspace(server);

    const last = await ws.api.POST('/stages', { body: { name: 'Último', position: 5 } });
    const past = await request(server, 'POST', '/v1/stages', { apiKey: ws.apiKey, body: { name: 'Longe', position: 7 } });

    expect(last.data!.position).toBe(5);
    expect(past.status).toBe(400);
    expect(past.body).toEqual({
      error: {
        requestId: expect.any(String),
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/position', message: 'must be from 1 to 6' }],
      },
    });
    expect(await namesOf(ws)).toEqual([...DEFAULT_STAGES, 'Último']);
  });

  it.each([
    ['the name is empty', { name: '' }, '/body/name'],
    ['the position is 0', { name: 'X', position: 0 }, '/body/position'],
    ['the name is missing', { position: 1 }, '/body/name'],
  ])('when %s, then it answers 400 validation_error', async (_, body, path) => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'POST', '/v1/stages', { apiKey: ws.apiKey, body });

    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
  });

  it('when ten stages are added at position 1 at once, then all are kept and positions stay 1..14', async () => {
    const ws = await createWorkspace(server);

    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => ws.api.POST('/stages', { body: { name: `Etapa ${i}`, position: 1 } })));

    expect(results.map((r) => r.response.status)).toEqual(Array(10).fill(201));
    const after = await stagesOf(ws);
    expect(after).toHaveLength(14);
    expectDense(after);
    expect(after.slice(10).map((s) => s.name)).toEqual([...DEFAULT_STAGES]);
  });

  it('when the first stage changes, then new threads enter the new first stage', async () => {
    const ws = await createWorkspace(server);
    const { data: intake } = await ws.api.POST('/stages', { body: { name: 'Entrada', position: 1 } });
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });

    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });

    expect(thread!.stageId).toBe(intake!.id);
  });
});

describe('PATCH /stages/{id}', () => {
  it('when renamed, then only its name and updatedAt change', async () => {
    const ws = await createWorkspace(server);
    const [, second] = await stagesOf(ws);

    const { data, response } = await ws.api.PATCH('/stages/{id}', { params: { path: { id: second!.id } }, body: { name: 'Atendimento humano' } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...second, name: 'Atendimento humano', updatedAt: expect.stringMatching(ISO_MS) });
    expect(data!.updatedAt >= second!.updatedAt).toBe(true);
    expect(await namesOf(ws)).toEqual(['Novo', 'Atendimento humano', 'Aguardando cliente', 'Resolvido']);
  });

  it.each([
    [4, 1, ['Resolvido', 'Novo', 'Em atendimento', 'Aguardando cliente']],
    [1, 3, ['Em atendimento', 'Aguardando cliente', 'Novo', 'Resolvido']],
    [2, 4, ['Novo', 'Aguardando cliente', 'Resolvido', 'Em atendimento']],
    [3, 2, ['Novo', 'Aguardando cliente', 'Em atendimento', 'Resolvido']],
    [2, 2, ['Novo', 'Em atendimento', 'Aguardando cliente', 'Resolvido']],
  ])('when the stage at %i moves to %i, then the stages in between shift by one', async (from, to, expected) => {
    const ws = await createWorkspace(server);
    const stage = (await stagesOf(ws))[from - 1]!;

    const { data } = await ws.api.PATCH('/stages/{id}', { params: { path: { id: stage.id } }, body: { position: to } });

    expect(data).toMatchObject({ id: stage.id, name: stage.name, position: to });
    const after = await stagesOf(ws);
    expect(after.map((s) => s.name)).toEqual(expected);
    expectDense(after);
  });

  it('when moved and renamed at once, then both apply', async () => {
    const ws = await createWorkspace(server);
    const last = (await stagesOf(ws))[3]!;

    const { data } = await ws.api.PATCH('/stages/{id}', { params: { path: { id: last.id } }, body: { name: 'Concluído', position: 1 } });

    expect(data).toMatchObject({ name: 'Concluído', position: 1 });
    expect(await namesOf(ws)).toEqual(['Concluído', 'Novo', 'Em atendimento', 'Aguardando cliente']);
  });

  it('when the position is past the last stage, then 400 and nothing moves', async () => {
    const ws = await createWorkspace(server);
    const before = await stagesOf(ws);

    const res = await request(server, 'PATCH', `/v1/stages/${before[0]!.id}`, { apiKey: ws.apiKey, body: { position: 5 } });

    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ path: '/body/position', message: 'must be from 1 to 4' }]);
    expect(await stagesOf(ws)).toEqual(before);
  });

  it('when many moves of the funnel run at once, then positions stay 1..n with every stage once', async () => {
    const ws = await createWorkspace(server);
    const stages = await stagesOf(ws);

    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        ws.api.PATCH('/stages/{id}', { params: { path: { id: stages[i % 4]!.id } }, body: { position: ((i * 3) % 4) + 1 } }),
      ),
    );

    expect(results.map((r) => r.response.status)).toEqual(Array(12).fill(200));
    const after = await stagesOf(ws);
    expectDense(after);
    expect(after.map((s) => s.id).sort()).toEqual(stages.map((s) => s.id).sort());
  });

  it.each([
    ['unknown', async () => randomUUID()],
    ['of another workspace', async () => (await stagesOf(await createWorkspace(server)))[0]!.id],
  ])('when the stage is %s, then it answers 404 not_found', async (_, id) => {
    const ws = await createWorkspace(server);

    const { error, response } = await ws.api.PATCH('/stages/{id}', { params: { path: { id: await id() } }, body: { name: 'X' } });

    expect(response.status).toBe(404);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'not_found', message: 'Stage not found.' } });
  });
});

describe('DELETE /stages/{id}', () => {
  it('when the stage is empty, then it answers 204, it is gone and the later stages move up', async () => {
    const ws = await createWorkspace(server);
    const [, second] = await stagesOf(ws);

    const { response } = await ws.api.DELETE('/stages/{id}', { params: { path: { id: second!.id } } });

    expect(response.status).toBe(204);
    const after = await stagesOf(ws);
    expect(after.map((s) => s.name)).toEqual(['Novo', 'Aguardando cliente', 'Resolvido']);
    expectDense(after);
    const again = await ws.api.DELETE('/stages/{id}', { params: { path: { id: second!.id } } });
    expect(again.response.status).toBe(404);
  });

  it('when a thread is in the stage, open or closed, then it answers 409 conflict and the stage stays', async () => {
    const ws = await createWorkspace(server);
    const [, second, third] = await stagesOf(ws);
    await openThreadIn(ws, second!.id);
    const closedId = await openThreadIn(ws, third!.id);
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: closedId } }, body: { status: 'closed' } });

    const withOpen = await ws.api.DELETE('/stages/{id}', { params: { path: { id: second!.id } } });
    const withClosed = await ws.api.DELETE('/stages/{id}', { params: { path: { id: third!.id } } });

    for (const { response, error } of [withOpen, withClosed]) {
      expect(response.status).toBe(409);
      expect(error).toEqual({
        error: { requestId: expect.any(String), code: 'conflict', message: 'This stage holds threads; move them to another stage first.' },
      });
    }
    expect(await namesOf(ws)).toEqual([...DEFAULT_STAGES]);
  });

  it('when its threads moved elsewhere, then it can be deleted and their history keeps the moves', async () => {
    const ws = await createWorkspace(server);
    const [first, second] = await stagesOf(ws);
    const threadId = await openThreadIn(ws, second!.id);
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { stageId: first!.id } });

    const { response } = await ws.api.DELETE('/stages/{id}', { params: { path: { id: second!.id } } });

    expect(response.status).toBe(204);
    const { data: history } = await ws.api.GET('/threads/{id}/history', { params: { path: { id: threadId } } });
    expect(history!.data.filter((e) => e.field === 'stageId').map((e) => [e.from, e.to])).toEqual([
      [null, first!.id],
      [first!.id, second!.id],
      [second!.id, first!.id],
    ]);
  });

  it('when it is the funnel’s only stage, then it answers 409 conflict', async () => {
    const ws = await createWorkspace(server);
    const stages = await stagesOf(ws);
    for (const stage of stages.slice(1)) await ws.api.DELETE('/stages/{id}', { params: { path: { id: stage.id } } });

    const { error, response } = await ws.api.DELETE('/stages/{id}', { params: { path: { id: stages[0]!.id } } });

    expect(response.status).toBe(409);
    expect(error).toEqual({ error: { requestId: expect.any(String), code: 'conflict', message: 'A funnel keeps at least one stage; this is its only one.' } });
    expect(await namesOf(ws)).toEqual(['Novo']);
  });

  it('when the stage is another workspace’s, then it answers 404 and that stage stays', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const theirs = await stagesOf(other);

    const { response } = await ws.api.DELETE('/stages/{id}', { params: { path: { id: theirs[1]!.id } } });

    expect(response.status).toBe(404);
    expect(await stagesOf(other)).toEqual(theirs);
  });
});
