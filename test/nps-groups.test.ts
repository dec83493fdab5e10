// NPS breakdowns (groupBy=channel|agent|stage|day) checked against a model: answers registered
// through the API on threads of two channels, three agents (and none) and several stages, then the
// threads moved and reassigned; for random windows (whole UTC days from the rollups, edge days
// from the threads, bounds in any offset) the totals and every group must be what the model
// computes from the values each thread had when it was answered. And the rollup stays exact when
// answers arrive at once.
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { npsScore } from '../src/services/nps.js';
import { buildAgent, buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type NpsStats = components['schemas']['NpsStats'];
type GroupBy = 'channel' | 'agent' | 'stage' | 'day';

const SEED = 20261122;
const DAY = 86_400_000;

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

interface Answer {
  score: number;
  at: number;
  channelId: string;
  agentId: string | null;
  stageId: string;
}

function counts(scores: number[]) {
  const promotores = scores.filter((s) => s >= 9).length;
  const neutros = scores.filter((s) => s === 7 || s === 8).length;
  const detratores = scores.filter((s) => s <= 6).length;
  const total = scores.length;
  return { promotores, neutros, detratores, total, npsScore: npsScore(promotores, detratores, total) };
}

/** What the API must answer for [from, to] (ms, inclusive), grouped or not. */
function model(answers: Answer[], from: number, to: number, groupBy?: GroupBy): NpsStats {
  const inside = answers.filter((a) => a.at >= from && a.at <= to);
  const totals = counts(inside.map((a) => a.score));
  if (!groupBy) return totals;
  const keyOf = (a: Answer): string | null =>
    groupBy === 'day' ? new Date(a.at).toISOString().slice(0, 10) : groupBy === 'channel' ? a.channelId : groupBy === 'agent' ? a.agentId : a.stageId;
  const keys = [...new Set(inside.map(keyOf))].sort((a, b) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : a > b ? 1 : 0));
  return { ...totals, groups: keys.map((key) => ({ key, ...counts(inside.filter((a) => keyOf(a) === key).map((a) => a.score)) })) };
}

const statsOf = (ws: TestWorkspace, dateFrom: string, dateTo: string, groupBy?: GroupBy) =>
  ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: ws.workspaceId, dateFrom, dateTo, ...(groupBy && { groupBy }) } } });

/** The instant written in an offset of `minutes` east of UTC, as a client in that zone would. */
function inOffset(t: number, minutes: number): string {
  if (minutes === 0) return new Date(t).toISOString();
  const local = new Date(t + minutes * 60_000).toISOString().slice(0, -1);
  const abs = Math.abs(minutes);
  return `${local}${minutes < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

describe('GET /threads/stats/nps?groupBy=', () => {
  it('when threads answered on many days are then moved and reassigned, then for random windows the totals and groups are the model’s (values at answer time)', async () => {
    const ws = await createWorkspace(server);
    const agents = await Promise.all(['Ana', 'Bruno', 'Carla'].map(async (name) => (await ws.api.POST('/agents', { body: buildAgent({ name }) })).data!.id));
    const { data: stageList } = await ws.api.GET('/stages');
    const stages = stageList!.data.map((s) => s.id);
    const start = Date.parse('2026-03-01T00:00:00.000Z');
    const plan = fc.sample(
      fc.record({
        channel: fc.nat(1),
        agent: fc.nat(3),
        stage: fc.nat(3),
        score: fc.integer({ min: 0, max: 10 }),
        at: fc.oneof(
          fc.integer({ min: 0, max: 6 * DAY }),
          fc.tuple(fc.integer({ min: 1, max: 6 }), fc.constantFrom(-1, 0, 1)).map(([d, e]) => d * DAY + e),
        ),
        later: fc.record({ stage: fc.nat(3), agent: fc.nat(3) }),
      }),
      { seed: SEED, numRuns: 70 },
    );

    const answers: Answer[] = await Promise.all(
      plan.map(async (p) => {
        const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
        const agentId = p.agent < 3 ? agents[p.agent]! : null;
        const { data: thread } = await ws.api.POST('/threads', {
          body: { contactId: contact!.id, channelId: ws.channels[p.channel]!.id, ...(agentId && { agentId }) },
        });
        await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { stageId: stages[p.stage]! } });
        const at = start + p.at;
        const { response } = await ws.api.POST('/threads/{id}/nps', {
          params: { path: { id: thread!.id } },
          body: { score: p.score, answeredAt: new Date(at).toISOString() },
        });
        expect(response.status).toBe(201);
        // Afterwards the thread moves on: its answer must stay in the groups it was given in.
        await ws.api.PATCH('/threads/{id}', {
          params: { path: { id: thread!.id } },
          body: { stageId: stages[p.later.stage]!, agentId: p.later.agent < 3 ? agents[p.later.agent]! : null, status: 'closed' },
        });
        return { score: p.score, at, channelId: ws.channels[p.channel]!.id, agentId, stageId: stages[p.stage]! };
      }),
    );

    const instants = [...answers.map((a) => a.at), ...Array.from({ length: 8 }, (_, d) => start + d * DAY)];
    const bound = fc.tuple(fc.constantFrom(...instants), fc.constantFrom(-1, 0, 0, 1)).map(([t, d]) => t + d);
    const windows = fc.sample(fc.tuple(bound, bound, fc.constantFrom(0, -180, 330), fc.constantFrom<GroupBy>('channel', 'agent', 'stage', 'day')), {
      seed: SEED,
      numRuns: 80,
    });
    windows.push([start - DAY, start + 8 * DAY, 0, 'agent'], [start, start + 3 * DAY - 1, -180, 'day'], [start + DAY, start + 2 * DAY - 1, 0, 'stage']);
    let grouped = 0;
    for (const [a, b, offset, groupBy] of windows) {
      const [from, to] = a <= b ? [a, b] : [b, a];
      const [dateFrom, dateTo] = [inOffset(from, offset), inOffset(to, offset)];

      const { data, response } = await statsOf(ws, dateFrom, dateTo, groupBy);

      expect(response.status).toBe(200);
      expect(data, `${groupBy} ${dateFrom} .. ${dateTo}`).toEqual(model(answers, from, to, groupBy));
      grouped += data!.groups!.length;
    }
    expect(grouped).toBeGreaterThan(150);
    // Without groupBy, no groups: the answer is the totals alone.
    const { data: plain } = await statsOf(ws, new Date(start).toISOString(), new Date(start + 7 * DAY).toISOString());
    expect(plain).toEqual(model(answers, start, start + 7 * DAY));
  });

  it('when grouped by agent, then answers given without an agent are the null group, last', async () => {
    const ws = await createWorkspace(server);
    const { data: agent } = await ws.api.POST('/agents', { body: buildAgent() });
    for (const agentId of [agent!.id, undefined, agent!.id]) {
      const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
      const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id, ...(agentId && { agentId }) } });
      await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread!.id } }, body: { score: agentId ? 10 : 0, answeredAt: '2026-04-10T12:00:00Z' } });
    }

    const { data } = await statsOf(ws, '2026-04-01T00:00:00Z', '2026-04-30T23:59:59.999Z', 'agent');

    expect(data).toEqual({
      promotores: 2,
      neutros: 0,
      detratores: 1,
      total: 3,
      npsScore: 33,
      groups: [
        { key: agent!.id, promotores: 2, neutros: 0, detratores: 0, total: 2, npsScore: 100 },
        { key: null, promotores: 0, neutros: 0, detratores: 1, total: 1, npsScore: -100 },
      ],
    });
  });

  it('when the window holds no answer, then groups is empty', async () => {
    const ws = await createWorkspace(server);

    const { data } = await statsOf(ws, '2026-01-01T00:00:00Z', '2026-12-31T23:59:59.999Z', 'day');

    expect(data).toEqual({ promotores: 0, neutros: 0, detratores: 0, total: 0, npsScore: null, groups: [] });
  });

  it('when groupBy is not a grouping, then 400 validation_error on it', async () => {
    const ws = await createWorkspace(server);
    const query = new URLSearchParams({ workspaceId: ws.workspaceId, dateFrom: '2026-01-01T00:00:00Z', dateTo: '2026-01-02T00:00:00Z', groupBy: 'contact' });

    const res = await request(server, 'GET', `/v1/threads/stats/nps?${query.toString()}`, { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ path: '/query/groupBy', message: expect.stringContaining('allowed values') }]);
  });
});

describe('nps_daily_groups', () => {
  it('when 60 threads of two channels and stages are answered at once, then every group of every day counts each answer once', async () => {
    const ws = await createWorkspace(server);
    const { data: stageList } = await ws.api.GET('/stages');
    const threads = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
        const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[i % 2]!.id } });
        if (i % 3 === 0) await ws.api.PATCH('/threads/{id}', { params: { path: { id: thread!.id } }, body: { stageId: stageList!.data[1]!.id } });
        return thread!.id;
      }),
    );

    await Promise.all(
      threads.map((id, i) =>
        ws.api.POST('/threads/{id}/nps', {
          params: { path: { id } },
          body: { score: i % 11, answeredAt: ['2026-05-01T10:00:00Z', '2026-05-02T00:00:00Z'][Math.floor(i / 2) % 2]! },
        }),
      ),
    );

    const rollup = await sql`
      select dimension, day::text as day, key::text as key, promotores, neutros, detratores
        from nps_daily_groups where workspace_id = ${ws.workspaceId} order by 1, 2, 3`.execute(server.db);
    const reference = await sql`
      select g.dimension, (t.nps_created_at at time zone 'UTC')::date::text as day, g.key::text as key,
             count(*) filter (where t.nps_score >= 9)::int as promotores,
             count(*) filter (where t.nps_score between 7 and 8)::int as neutros,
             count(*) filter (where t.nps_score <= 6)::int as detratores
        from threads t
       cross join lateral (values ('channel', t.channel_id), ('agent', coalesce(t.nps_agent_id, '00000000-0000-0000-0000-000000000000')), ('stage', t.nps_stage_id)) g(dimension, key)
       where t.workspace_id = ${ws.workspaceId} and t.nps_created_at is not null
       group by 1, 2, 3 order by 1, 2, 3`.execute(server.db);
    expect(rollup.rows).toEqual(reference.rows);
    expect(rollup.rows).toHaveLength(2 * 2 + 2 + 2 * 2);
  });
});
