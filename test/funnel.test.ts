// Funnel statistics (GET /threads/stats/funnel) checked against a model: threads are opened and
// moved through the API (concurrently across threads), the model keeps every entry into a stage as
// the API reported it (the opening's createdAt, each move's updatedAt), and for many windows,
// bounds on those instants and 1 ms beside them, the answer must be what the model computes.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type FunnelStage = components['schemas']['FunnelStage'];
type Stage = components['schemas']['Stage'];
type Thread = components['schemas']['Thread'];

const SEED = 20261121;

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

/** A thread as the model knows it: its stays, in order, each entered at an instant (ms). */
interface ModelThread {
  id: string;
  status: 'open' | 'closed';
  stays: Array<{ stageId: string; enteredAt: number }>;
  /** Moves out of a stage: from which, when, after how long. */
  exits: Array<{ stageId: string; at: number; stayMs: number }>;
}

const ms = (iso: string): number => Date.parse(iso);

/** The funnel the model computes for [from, to] (ms, both inclusive), stages in funnel order. */
function modelFunnel(stages: Stage[], threads: ModelThread[], from: number, to: number): FunnelStage[] {
  const inWindow = (t: number) => t >= from && t <= to;
  return stages.map((stage) => {
    const entered = threads.flatMap((t) => t.stays).filter((s) => s.stageId === stage.id && inWindow(s.enteredAt)).length;
    const stays = threads
      .flatMap((t) => t.exits)
      .filter((e) => e.stageId === stage.id && inWindow(e.at))
      .map((e) => e.stayMs)
      .sort((a, b) => a - b);
    const middle = Math.floor(stays.length / 2);
    const medianMs = stays.length === 0 ? null : stays.length % 2 ? stays[middle]! : Math.floor((stays[middle - 1]! + stays[middle]!) / 2 + 0.5);
    return {
      stageId: stage.id,
      name: stage.name,
      entered,
      exited: stays.length,
      current: threads.filter((t) => t.status === 'open' && t.stays.at(-1)!.stageId === stage.id).length,
      medianSecondsInStage: medianMs === null ? null : medianMs / 1000,
    };
  });
}

const funnelOf = (ws: TestWorkspace, dateFrom: string, dateTo: string) => ws.api.GET('/threads/stats/funnel', { params: { query: { dateFrom, dateTo } } });

async function stagesOf(ws: TestWorkspace): Promise<Stage[]> {
  return (await ws.api.GET('/stages')).data!.data;
}

async function openThread(ws: TestWorkspace, channel: number): Promise<Thread> {
  const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
  const { data } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[channel]!.id } });
  return data!;
}

const toModel = (thread: Thread): ModelThread => ({
  id: thread.id,
  status: thread.status,
  stays: [{ stageId: thread.stageId, enteredAt: ms(thread.createdAt) }],
  exits: [],
});

/** Applies a PATCH through the API and records what it did in the model. */
async function change(ws: TestWorkspace, model: ModelThread, body: components['schemas']['ThreadUpdate']): Promise<void> {
  const { data, response } = await ws.api.PATCH('/threads/{id}', { params: { path: { id: model.id } }, body });
  expect(response.status).toBe(200);
  const last = model.stays.at(-1)!;
  if (data!.stageId !== last.stageId) {
    const at = ms(data!.updatedAt);
    model.exits.push({ stageId: last.stageId, at, stayMs: at - last.enteredAt });
    model.stays.push({ stageId: data!.stageId, enteredAt: at });
  }
  model.status = data!.status;
}

const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n));

describe('GET /threads/stats/funnel', () => {
  it('when threads move through a reordered funnel, then for random windows every stage’s counts and median are what the model computes', async () => {
    const ws = await createWorkspace(server);
    // Five stages, the newest first and a default one moved, so funnel order is not creation order.
    await ws.api.POST('/stages', { body: { name: 'Triagem', position: 1 } });
    await ws.api.PATCH('/stages/{id}', { params: { path: { id: (await stagesOf(ws))[4]!.id } }, body: { position: 3 } });
    const stages = await stagesOf(ws);
    const threads: ModelThread[] = [];
    for (let i = 0; i < 16; i++) threads.push(toModel(await openThread(ws, i % 2)));

    // Rounds of changes, one per thread at most per round (concurrently), spaced a few ms apart.
    const plan = fc.sample(
      fc.array(fc.record({ thread: fc.nat(15), stage: fc.nat(stages.length - 1), close: fc.nat(9), pause: fc.nat(6) }), { minLength: 8, maxLength: 8 }),
      { seed: SEED, numRuns: 14 },
    );
    for (const round of plan) {
      const seen = new Set<number>();
      const moves = round.filter((m) => !seen.has(m.thread) && seen.add(m.thread));
      await Promise.all(
        moves.map(async (m) => {
          // The scenario: moves interleave at random, a few milliseconds apart.
          await sleep(m.pause);
          const thread = threads[m.thread]!;
          const status = m.close === 0 ? (thread.status === 'open' ? 'closed' : 'open') : undefined;
          await change(ws, thread, { stageId: stages[m.stage]!.id, ...(status && { status }) });
        }),
      );
    }

    const instants = threads.flatMap((t) => [...t.stays.map((s) => s.enteredAt), ...t.exits.map((e) => e.at)]);
    const delta = fc.constantFrom(-1, 0, 0, 1);
    const bound = fc.tuple(fc.constantFrom(...instants), delta).map(([t, d]) => t + d);
    const windows: Array<[number, number]> = fc.sample(fc.tuple(bound, bound), { seed: SEED, numRuns: 60 }).map(([a, b]) => (a <= b ? [a, b] : [b, a]));
    const [first, last] = [Math.min(...instants), Math.max(...instants)];
    windows.push([first, last], [first - 10_000, first - 1], [first, first]);

    let withMedian = 0;
    for (const [from, to] of windows) {
      const { data, response } = await funnelOf(ws, new Date(from).toISOString(), new Date(to).toISOString());
      expect(response.status).toBe(200);
      const expected = modelFunnel(stages, threads, from, to);
      expect(data, `${new Date(from).toISOString()} .. ${new Date(to).toISOString()}`).toEqual({ stages: expected });
      withMedian += expected.filter((s) => s.medianSecondsInStage !== null).length;
    }
    expect(withMedian).toBeGreaterThan(60);
    expect(threads.reduce((n, t) => n + t.exits.length, 0)).toBeGreaterThan(40);
  });

  it('when the bounds carry offsets, then the window is the same instants', async () => {
    const ws = await createWorkspace(server);
    const thread = toModel(await openThread(ws, 0));
    const stages = await stagesOf(ws);
    await change(ws, thread, { stageId: stages[1]!.id });
    const at = thread.exits[0]!.at;
    const local = (t: number) => `${new Date(t - 3 * 3_600_000).toISOString().slice(0, -1)}-03:00`;

    const { data } = await funnelOf(ws, local(at), local(at));

    expect(data).toEqual({ stages: modelFunnel(stages, [thread], at, at) });
    expect(data!.stages[0]).toMatchObject({ exited: 1, entered: 0 });
  });

  it('when a stage was deleted after its moves, then it is not listed and the others are unchanged', async () => {
    const ws = await createWorkspace(server);
    const thread = toModel(await openThread(ws, 0));
    let stages = await stagesOf(ws);
    await change(ws, thread, { stageId: stages[2]!.id });
    await change(ws, thread, { stageId: stages[3]!.id });
    await ws.api.DELETE('/stages/{id}', { params: { path: { id: stages[2]!.id } } });
    stages = await stagesOf(ws);

    const { data } = await funnelOf(ws, '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z');

    expect(data).toEqual({ stages: modelFunnel(stages, [thread], 0, ms('2100-01-01T00:00:00Z')) });
    expect(data!.stages.map((s) => s.name)).toEqual(['Novo', 'Em atendimento', 'Resolvido']);
  });

  it('when the workspace has no threads, then every stage answers zeros and a null median', async () => {
    const ws = await createWorkspace(server);

    const { data } = await funnelOf(ws, '2026-01-01T00:00:00Z', '2026-12-31T23:59:59.999Z');

    expect(data!.stages.map(({ stageId: _, ...rest }) => rest)).toEqual(
      ['Novo', 'Em atendimento', 'Aguardando cliente', 'Resolvido'].map((name) => ({ name, entered: 0, exited: 0, current: 0, medianSecondsInStage: null })),
    );
  });

  it('when another workspace’s threads move, then they count only there', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const theirs = toModel(await openThread(other, 0));
    await change(other, theirs, { stageId: (await stagesOf(other))[1]!.id });

    const mine = await funnelOf(ws, '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z');
    const their = await funnelOf(other, '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z');

    expect(mine.data!.stages.every((s) => s.entered === 0 && s.current === 0)).toBe(true);
    expect(their.data!.stages.map((s) => [s.entered, s.exited, s.current])).toEqual([
      [1, 1, 0],
      [1, 0, 1],
      [0, 0, 0],
      [0, 0, 0],
    ]);
  });

  it.each([
    [
      'dateFrom is after dateTo',
      { dateFrom: '2026-02-01T00:00:00Z', dateTo: '2026-01-31T23:59:59.999Z' },
      { path: '/query/dateFrom', message: 'must not be after dateTo' },
    ],
    ['dateTo is missing', { dateFrom: '2026-02-01T00:00:00Z' }, { path: '/query/dateTo', message: expect.stringContaining('dateTo') }],
    [
      'dateFrom has no offset',
      { dateFrom: '2026-02-01T00:00:00', dateTo: '2026-03-01T00:00:00Z' },
      { path: '/query/dateFrom', message: 'must match format "date-time"' },
    ],
  ])('when %s, then 400 validation_error', async (_, query, detail) => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', `/v1/threads/stats/funnel?${new URLSearchParams(query as Record<string, string>).toString()}`, {
      apiKey: ws.apiKey,
    });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: { requestId: expect.any(String), code: 'validation_error', message: 'The request does not match the contract.', details: [detail] },
    });
  });
});
