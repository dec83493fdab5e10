// NPS statistics: the window (both bounds inclusive, offsets), the arithmetic and its rounding, the
// query's validation and the workspace check; and the pure arithmetic of src/services/nps.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { npsScore, npsStats } from '../src/services/nps.js';
import { EARLIEST_INSTANT, instantToDate, instantToIso, parseInstant } from '../src/time.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type NpsStats = components['schemas']['NpsStats'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

interface Answer {
  score: number;
  answeredAt: string;
}

/** Registers each answer on a thread of its own, through the API (contact, thread, answer). */
async function seedAnswers(ws: TestWorkspace, answers: Answer[]): Promise<void> {
  await Promise.all(
    answers.map(async ({ score, answeredAt }) => {
      const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
      const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });
      const { response } = await ws.api.POST('/threads/{id}/nps', { params: { path: { id: thread!.id } }, body: { score, answeredAt } });
      expect(response.status).toBe(201);
    }),
  );
}

const statsOf = (ws: TestWorkspace, query: { workspaceId?: string; dateFrom: string; dateTo: string }) =>
  ws.api.GET('/threads/stats/nps', { params: { query: { workspaceId: ws.workspaceId, ...query } } });

const statsUrl = (query: Record<string, string>): string => `/v1/threads/stats/nps?${new URLSearchParams(query).toString()}`;

const scores = (score: number, count: number, answeredAt: string): Answer[] => Array.from({ length: count }, () => ({ score, answeredAt }));

const stats = (promotores: number, neutros: number, detratores: number, npsScore: number | null): NpsStats => ({
  promotores,
  neutros,
  detratores,
  total: promotores + neutros + detratores,
  npsScore,
});

const MARCH = { dateFrom: '2026-03-01T00:00:00.000Z', dateTo: '2026-03-31T23:59:59.999Z' };
const MID_MARCH = '2026-03-15T12:00:00.000Z';

interface WindowCase {
  title: string;
  dateFrom: string;
  dateTo: string;
  answers: Answer[];
  expected: NpsStats;
}

const cases: WindowCase[] = [
  {
    title: 'answers lie exactly on dateFrom and on dateTo and others 1 ms outside',
    ...MARCH,
    answers: [
      { score: 10, answeredAt: '2026-03-01T00:00:00.000Z' },
      { score: 8, answeredAt: '2026-03-31T23:59:59.999Z' },
      { score: 0, answeredAt: '2026-02-28T23:59:59.999Z' },
      { score: 0, answeredAt: '2026-04-01T00:00:00.000Z' },
    ],
    expected: stats(1, 1, 0, 50),
  },
  {
    title: 'the query bounds carry a -03:00 offset',
    dateFrom: '2026-01-01T00:00:00-03:00',
    dateTo: '2026-01-01T23:59:59.999-03:00',
    answers: [
      { score: 9, answeredAt: '2026-01-01T03:00:00.000Z' },
      { score: 7, answeredAt: '2026-01-02T02:59:59.999Z' },
      { score: 1, answeredAt: '2026-01-01T02:59:59.999Z' },
      { score: 1, answeredAt: '2026-01-02T03:00:00.000Z' },
      { score: 2, answeredAt: '2026-01-01T00:00:00.000Z' },
    ],
    expected: stats(1, 1, 0, 50),
  },
  {
    title: 'the query bounds carry hour-only offsets (-03)',
    dateFrom: '2026-01-01T00:00:00-03',
    dateTo: '2026-01-01T23:59:59.999-03',
    answers: [
      { score: 9, answeredAt: '2026-01-01T03:00:00.000Z' },
      { score: 1, answeredAt: '2026-01-01T02:59:59.999Z' },
      { score: 1, answeredAt: '2026-01-02T03:00:00.000Z' },
    ],
    expected: stats(1, 0, 0, 100),
  },
  {
    title: 'the answers were registered with offsets and the query is in UTC',
    dateFrom: '2026-02-11T00:00:00.000Z',
    dateTo: '2026-02-11T23:59:59.999Z',
    answers: [
      { score: 4, answeredAt: '2026-02-10T21:30:00-03:00' },
      { score: 10, answeredAt: '2026-02-11T01:30:00+02:00' },
    ],
    expected: stats(0, 0, 1, -100),
  },
  {
    title: 'dateFrom reads later than dateTo but is earlier once its +02:00 offset is applied',
    dateFrom: '2026-01-01T01:00:00+02:00',
    dateTo: '2026-01-01T00:00:00Z',
    answers: [
      { score: 10, answeredAt: '2025-12-31T23:30:00.000Z' },
      { score: 0, answeredAt: '2025-12-31T22:59:59.999Z' },
    ],
    expected: stats(1, 0, 0, 100),
  },
  {
    title: 'dateFrom equals dateTo and one answer lies on that instant',
    dateFrom: '2026-05-05T05:05:05.005Z',
    dateTo: '2026-05-05T05:05:05.005Z',
    answers: [
      { score: 6, answeredAt: '2026-05-05T05:05:05.005Z' },
      { score: 10, answeredAt: '2026-05-05T05:05:05.006Z' },
      { score: 10, answeredAt: '2026-05-05T05:05:05.004Z' },
    ],
    expected: stats(0, 0, 1, -100),
  },
  {
    title: '1 promoter and 7 neutrals make +12.5, rounded away from zero',
    ...MARCH,
    answers: [...scores(9, 1, MID_MARCH), ...scores(7, 4, MID_MARCH), ...scores(8, 3, MID_MARCH)],
    expected: stats(1, 7, 0, 13),
  },
  {
    title: '1 detractor and 7 neutrals make -12.5, rounded away from zero',
    ...MARCH,
    answers: [...scores(6, 1, MID_MARCH), ...scores(8, 7, MID_MARCH)],
    expected: stats(0, 7, 1, -13),
  },
  {
    title: '3 promoters and 5 neutrals make +37.5, rounded away from zero',
    ...MARCH,
    answers: [...scores(10, 3, MID_MARCH), ...scores(7, 5, MID_MARCH)],
    expected: stats(3, 5, 0, 38),
  },
  {
    title: '2 promoters and 1 detractor make 33.3, rounded down',
    ...MARCH,
    answers: [...scores(10, 2, MID_MARCH), ...scores(0, 1, MID_MARCH)],
    expected: stats(2, 0, 1, 33),
  },
  {
    title: '2 promoters and 1 neutral make 66.7, rounded up',
    ...MARCH,
    answers: [...scores(9, 2, MID_MARCH), ...scores(8, 1, MID_MARCH)],
    expected: stats(2, 1, 0, 67),
  },
  {
    title: 'every answer is a passive',
    ...MARCH,
    answers: [...scores(7, 2, MID_MARCH), ...scores(8, 2, MID_MARCH)],
    expected: stats(0, 4, 0, 0),
  },
  {
    title: 'every answer is a promoter',
    ...MARCH,
    answers: [...scores(9, 2, MID_MARCH), ...scores(10, 1, MID_MARCH)],
    expected: stats(3, 0, 0, 100),
  },
  {
    title: 'every answer is a detractor',
    ...MARCH,
    answers: [...scores(0, 1, MID_MARCH), ...scores(6, 1, MID_MARCH)],
    expected: stats(0, 0, 2, -100),
  },
  {
    title: 'the scores are 0 to 10 once each (9-10 promotores, 7-8 neutros, 0-6 detratores)',
    ...MARCH,
    answers: Array.from({ length: 11 }, (_, score) => ({ score, answeredAt: MID_MARCH })),
    expected: stats(2, 2, 7, -45),
  },
  {
    title: 'the scores are 6, 7, 8 and 9 (each side of both boundaries)',
    ...MARCH,
    answers: [6, 7, 8, 9].map((score) => ({ score, answeredAt: MID_MARCH })),
    expected: stats(1, 2, 1, 0),
  },
  {
    title: 'every answer lies outside the window',
    ...MARCH,
    answers: [
      { score: 10, answeredAt: '2026-02-28T23:59:59.999Z' },
      { score: 0, answeredAt: '2026-04-01T00:00:00.000Z' },
    ],
    expected: stats(0, 0, 0, null),
  },
  {
    title: 'the window spans years 0001 to 9999',
    dateFrom: '0001-01-01T00:00:00Z',
    dateTo: '9999-12-31T23:59:59.999Z',
    answers: [
      { score: 9, answeredAt: '2001-01-01T00:00:00.000Z' },
      { score: 3, answeredAt: MID_MARCH },
    ],
    expected: stats(1, 0, 1, 0),
  },
];

describe('GET /threads/stats/nps', () => {
  it.each(cases.map((c) => [c.title, c] as const))(
    'when %s, then it answers the counts and score of the window',
    async (_, { dateFrom, dateTo, answers, expected }) => {
      const ws = await createWorkspace(server);
      await seedAnswers(ws, answers);

      const { data, response } = await statsOf(ws, { dateFrom, dateTo });

      expect(response.status).toBe(200);
      expect(data).toEqual(expected);
    },
  );

  it('when the workspace has no answers, then it answers zero counts and a null score', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await statsOf(ws, MARCH);

    expect(response.status).toBe(200);
    expect(data).toEqual(stats(0, 0, 0, null));
  });

  it('when workspaceId is the key’s own in upper case, then it answers 200', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await statsOf(ws, { workspaceId: ws.workspaceId.toUpperCase(), ...MARCH });

    expect(response.status).toBe(200);
    expect(data).toEqual(stats(0, 0, 0, null));
  });

  it('when workspaceId is the key’s own in upper case, then the workspace’s answers are counted', async () => {
    const ws = await createWorkspace(server);
    await seedAnswers(ws, [{ score: 10, answeredAt: MID_MARCH }]);

    const { data } = await statsOf(ws, { workspaceId: ws.workspaceId.toUpperCase(), ...MARCH });

    expect(data).toEqual(stats(1, 0, 0, 100));
  });

  it.each([
    ['another workspace', async () => (await createWorkspace(server)).workspaceId],
    ['a workspace that does not exist', async () => randomUUID()],
  ])('when workspaceId is %s, then it answers 403 forbidden', async (_, otherWorkspaceId) => {
    const ws = await createWorkspace(server);

    const { error, response } = await statsOf(ws, { workspaceId: await otherWorkspaceId(), ...MARCH });

    expect(response.status).toBe(403);
    expect(error).toEqual({ error: { code: 'forbidden', message: 'This API key cannot read another workspace.', requestId: expect.any(String) } });
  });

  it.each([
    ['both in UTC', '2026-02-01T00:00:00.000Z', '2026-01-31T23:59:59.999Z'],
    ['once the offsets are applied, though the text reads earlier', '2026-01-01T00:00:00-03:00', '2026-01-01T02:00:00Z'],
    ['once an hour-only offset is applied', '2026-01-02T00:00:00+03', '2026-01-01T20:00:00Z'],
    ['by a leap second (23:59:60 is the next minute)', '2016-12-31T23:59:60Z', '2016-12-31T23:59:59.999Z'],
    ['by less than a millisecond', '2026-01-01T00:00:00.0005Z', '2026-01-01T00:00:00.0001Z'],
  ])('when dateFrom is after dateTo (%s), then it answers 400 validation_error', async (_, dateFrom, dateTo) => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', statsUrl({ workspaceId: ws.workspaceId, dateFrom, dateTo }), { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: '/query/dateFrom', message: 'must not be after dateTo' }],
        requestId: expect.any(String),
      },
    });
  });

  it.each(['workspaceId', 'dateFrom', 'dateTo'])('when %s is missing, then it answers 400 validation_error naming it', async (missing) => {
    const ws = await createWorkspace(server);
    const query: Record<string, string> = { workspaceId: ws.workspaceId, ...MARCH };
    delete query[missing];

    const res = await request(server, 'GET', statsUrl(query), { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: `/query/${missing}`, message: expect.stringContaining(missing) }],
        requestId: expect.any(String),
      },
    });
  });

  it.each([
    ['dateFrom', 'yesterday'],
    ['dateFrom', '2026-02-30T00:00:00Z'],
    ['dateFrom', '2026-01-01T00:00:00'],
    ['dateTo', '2026-01-01'],
    ['dateTo', '2026-01-01T24:00:00Z'],
    ['dateTo', '1767225600000'],
  ])('when %s is %s, then it answers 400 validation_error on it', async (field, value) => {
    const ws = await createWorkspace(server);
    const query = { workspaceId: ws.workspaceId, ...MARCH, [field]: value };

    const res = await request(server, 'GET', statsUrl(query), { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        details: [{ path: `/query/${field}`, message: 'must match format "date-time"' }],
        requestId: expect.any(String),
      },
    });
  });

  it('when dateFrom lies in year 0000, then the window counts from year 0001, where answers begin', async () => {
    const ws = await createWorkspace(server);
    const query = { workspaceId: ws.workspaceId, dateFrom: '0000-06-01T00:00:00Z', dateTo: MARCH.dateTo };

    const res = await request(server, 'GET', statsUrl(query), { apiKey: ws.apiKey });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ promotores: 0, neutros: 0, detratores: 0, total: 0, npsScore: null });
  });

  it('when workspaceId is not a UUID, then it answers 400 validation_error on it', async () => {
    const ws = await createWorkspace(server);

    const res = await request(server, 'GET', statsUrl({ workspaceId: 'mine', ...MARCH }), { apiKey: ws.apiKey });

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: { code: 'validation_error', message: 'The request does not match the contract.', details: expect.any(Array), requestId: expect.any(String) },
    });
    expect(res.body.error.details).toEqual([{ path: '/query/workspaceId', message: 'must match format "uuid"' }]);
  });
});

describe('npsScore', () => {
  it.each([
    { promotores: 0, detratores: 0, total: 0, expected: null },
    { promotores: 1, detratores: 0, total: 1, expected: 100 },
    { promotores: 0, detratores: 1, total: 1, expected: -100 },
    { promotores: 0, detratores: 0, total: 5, expected: 0 },
    { promotores: 1, detratores: 1, total: 2, expected: 0 },
    { promotores: 1, detratores: 0, total: 8, expected: 13 },
    { promotores: 0, detratores: 1, total: 8, expected: -13 },
    { promotores: 3, detratores: 0, total: 8, expected: 38 },
    { promotores: 0, detratores: 3, total: 8, expected: -38 },
    { promotores: 5, detratores: 0, total: 8, expected: 63 },
    { promotores: 0, detratores: 7, total: 8, expected: -88 },
    { promotores: 1, detratores: 0, total: 200, expected: 1 },
    { promotores: 0, detratores: 1, total: 200, expected: -1 },
    { promotores: 1, detratores: 0, total: 201, expected: 0 },
    { promotores: 0, detratores: 1, total: 201, expected: 0 },
    { promotores: 1, detratores: 0, total: 16, expected: 6 },
    { promotores: 2, detratores: 1, total: 3, expected: 33 },
    { promotores: 2, detratores: 0, total: 3, expected: 67 },
    { promotores: 0, detratores: 2, total: 3, expected: -67 },
    { promotores: 2, detratores: 7, total: 11, expected: -45 },
    { promotores: 54, detratores: 13, total: 88, expected: 47 },
    { promotores: 1_000_001, detratores: 0, total: 2_000_000, expected: 50 },
    { promotores: 500_001, detratores: 0, total: 2_000_000, expected: 25 },
    { promotores: 1, detratores: 0, total: 40, expected: 3 },
    { promotores: 0, detratores: 1, total: 40, expected: -3 },
  ])('when promotores=$promotores, detratores=$detratores and total=$total, then it is $expected', ({ promotores, detratores, total, expected }) => {
    expect(npsScore(promotores, detratores, total)).toBe(expected);
  });
});

describe('npsStats', () => {
  it.each([
    { counts: { promotores: 0, neutros: 0, detratores: 0 }, expected: stats(0, 0, 0, null) },
    { counts: { promotores: 1, neutros: 7, detratores: 0 }, expected: stats(1, 7, 0, 13) },
    { counts: { promotores: 0, neutros: 7, detratores: 1 }, expected: stats(0, 7, 1, -13) },
    { counts: { promotores: 0, neutros: 3, detratores: 0 }, expected: stats(0, 3, 0, 0) },
  ])('when the counts are $counts, then total is their sum and the score follows', ({ counts, expected }) => {
    expect(npsStats(counts)).toEqual(expected);
  });
});

describe('parseInstant', () => {
  it.each([
    ['2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000000Z'],
    ['2026-01-01T00:00:00-03:00', '2026-01-01T03:00:00.000000Z'],
    ['2026-01-01T00:00:00-03', '2026-01-01T03:00:00.000000Z'],
    ['2026-01-01T05:30:00+0530', '2026-01-01T00:00:00.000000Z'],
    ['2026-01-01t00:00:00.5z', '2026-01-01T00:00:00.500000Z'],
    ['2026-01-01 00:00:00.0005Z', '2026-01-01T00:00:00.000500Z'],
    ['2026-01-01T00:00:00.1234567Z', '2026-01-01T00:00:00.123456Z'],
    ['2016-12-31T23:59:60Z', '2017-01-01T00:00:00.000000Z'],
    ['2016-12-31T18:59:60-05:00', '2017-01-01T00:00:00.000000Z'],
    ['1969-12-31T23:59:59.9995Z', '1969-12-31T23:59:59.999500Z'],
    ['0050-06-15T12:00:00Z', '0050-06-15T12:00:00.000000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000000Z'],
    ['9999-12-31T23:59:59.999999-23:59', '10000-01-01T23:58:59.999999Z'],
  ])('when the text is %s, then it reads the instant %s', (text, expected) => {
    const instant = parseInstant(text);

    expect(instant).toBeTypeOf('bigint');
    expect(instantToIso(instant!)).toBe(expected);
  });

  it.each(['yesterday', '2026-01-01', '2026-01-01T00:00:00', '1767225600000'])('when the text is %s, then it reads nothing', (text) => {
    expect(parseInstant(text)).toBeUndefined();
  });

  it('when an instant falls before year 0001 once its offset is applied, then it is earlier than EARLIEST_INSTANT', () => {
    expect(parseInstant('0001-01-01T00:30:00+01:00')! < EARLIEST_INSTANT).toBe(true);
    expect(parseInstant('0001-01-01T00:00:00Z')! < EARLIEST_INSTANT).toBe(false);
  });

  it('when an instant before 1970 has microseconds, then its Date rounds down to the millisecond', () => {
    expect(instantToDate(parseInstant('1969-12-31T23:59:59.9995Z')!).toISOString()).toBe('1969-12-31T23:59:59.999Z');
  });
});
