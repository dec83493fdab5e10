// The NPS daily rollup: countNpsAnswers (whole UTC days from nps_daily, the edge days from threads)
// answers exactly what a plain count over threads answers, for random windows; setNpsAnswer keeps
// nps_daily exact, also under concurrent answers.
import fc from 'fast-check';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { countNpsAnswers, setNpsAnswer, type NpsCounts } from '../src/db/threads.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { EARLIEST_INSTANT, instantToDate, instantToIso, parseInstant, wholeUtcDays } from '../src/time.js';
import { openDatabase } from './helpers/server.js';

const SEED = 20260301;
const MS = 1_000n;
const DAY = 86_400_000_000n;
const at = (text: string): bigint => parseInstant(text)!;

let db: Db;
beforeAll(async () => {
  db = await openDatabase();
});
afterAll(async () => {
  await db.destroy();
});

/** A workspace with one contact and channel and `count` closed threads without answers. */
async function workspaceWithThreads(count: number): Promise<{ workspaceId: string; threadIds: string[] }> {
  const { workspaceId, channels } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Rollup' });
  const contactId = uuidv7();
  await db.insertInto('contacts').values({ workspace_id: workspaceId, id: contactId, name: 'Contato' }).execute();
  const threadIds = Array.from({ length: count }, () => uuidv7());
  const stage = await db.selectFrom('stages').select('id').where('workspace_id', '=', workspaceId).where('position', '=', 1).executeTakeFirstOrThrow();
  const now = new Date();
  await db
    .insertInto('threads')
    .values(
      threadIds.map((id) => ({
        workspace_id: workspaceId,
        id,
        contact_id: contactId,
        channel_id: channels[0]!.id,
        stage_id: stage.id,
        stage_entered_at: now,
        status: 'closed' as const,
        closed_at: now,
      })),
    )
    .execute();
  return { workspaceId, threadIds };
}

/** The reference: the plain count over threads, bounds read by PostgreSQL from the given text. */
async function referenceCount(workspaceId: string, from: string, to: string): Promise<NpsCounts> {
  const { rows } = await sql<NpsCounts>`
    select count(*) filter (where nps_score >= 9)::int as promotores,
           count(*) filter (where nps_score between 7 and 8)::int as neutros,
           count(*) filter (where nps_score <= 6)::int as detratores
      from threads
     where workspace_id = ${workspaceId}
       and nps_created_at >= ${from}::timestamptz
       and nps_created_at <= ${to}::timestamptz`.execute(db);
  return rows[0]!;
}

interface DailyRow {
  day: string;
  promotores: number;
  neutros: number;
  detratores: number;
}

async function dailyRows(workspaceId: string): Promise<DailyRow[]> {
  const { rows } = await sql<DailyRow>`
    select day::text as day, promotores, neutros, detratores from nps_daily where workspace_id = ${workspaceId} order by day`.execute(db);
  return rows;
}

/** nps_daily as it should be: the workspace's answers grouped by the UTC day of nps_created_at. */
async function dailyFromThreads(workspaceId: string): Promise<DailyRow[]> {
  const { rows } = await sql<DailyRow>`
    select (nps_created_at at time zone 'UTC')::date::text as day,
           count(*) filter (where nps_score >= 9)::int as promotores,
           count(*) filter (where nps_score between 7 and 8)::int as neutros,
           count(*) filter (where nps_score <= 6)::int as detratores
      from threads
     where workspace_id = ${workspaceId} and nps_created_at is not null
     group by 1
     order by 1`.execute(db);
  return rows;
}

/** Midnights UTC of the days the answers cluster around: early March 2026, and across 1970-01-01. */
const MARCH = Array.from({ length: 8 }, (_, i) => at('2026-03-01T00:00:00Z') + BigInt(i) * DAY);
const EPOCH = Array.from({ length: 4 }, (_, i) => at('1969-12-30T00:00:00Z') + BigInt(i) * DAY);
const MIDNIGHTS = [...MARCH, ...EPOCH];
const CLUSTERS: Array<[bigint, bigint]> = [
  [MARCH[0]!, MARCH[MARCH.length - 1]!],
  [EPOCH[0]!, EPOCH[EPOCH.length - 1]!],
];
const LATEST_INSTANT = at('9999-12-31T23:59:59.999999Z');

const inCluster = fc.constantFrom(...CLUSTERS).chain(([lo, hi]) => fc.bigInt({ min: lo, max: hi }));

/** Answer times, to the millisecond as the API stores them: anywhere, at midnight, or 1 ms beside it. */
const answerInstant = fc.oneof(
  inCluster.map((micros) => micros - (((micros % MS) + MS) % MS)),
  fc.tuple(fc.constantFrom(...MIDNIGHTS), fc.constantFrom(-MS, 0n, MS)).map(([midnight, delta]) => midnight + delta),
);

const ANSWERS = fc.sample(fc.tuple(answerInstant, fc.integer({ min: 0, max: 10 })), { seed: SEED, numRuns: 400 });

const OFFSETS: Array<[string, bigint]> = [
  ['Z', 0n],
  ['+00:00', 0n],
  ['-03:00', -3n * 3_600_000_000n],
  ['-03', -3n * 3_600_000_000n],
  ['+05:30', 330n * 60_000_000n],
  ['+0530', 330n * 60_000_000n],
  ['+14:00', 14n * 3_600_000_000n],
  ['-12:00', -12n * 3_600_000_000n],
];

/** The instant as RFC 3339 text in the given offset, with 6, 3 or no fraction digits when they lose nothing. */
function textOf(instant: bigint, [suffix, offset]: [string, bigint], short: boolean): string {
  let text = instantToIso(instant + offset).slice(0, -1);
  if (short && text.endsWith('000')) text = text.slice(0, -3);
  if (short && text.endsWith('.000')) text = text.slice(0, -4);
  return `${text}${suffix}`;
}

describe('countNpsAnswers over the daily rollup', () => {
  it('when windows are random (bounds on answers, on midnights, 1 µs or 1 ms beside them, in any offset), then it answers what the plain count over threads answers', async () => {
    const { workspaceId, threadIds } = await workspaceWithThreads(ANSWERS.length);
    const answerTimes = ANSWERS.map(([instant]) => instant);
    await Promise.all(ANSWERS.map(([instant, score], i) => setNpsAnswer(db, workspaceId, threadIds[i]!, score, instantToDate(instant))));
    expect(await dailyRows(workspaceId)).toEqual(await dailyFromThreads(workspaceId));

    const delta = fc.constantFrom(-MS, -1n, 0n, 1n, MS);
    const bound = fc.oneof(
      { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...answerTimes), delta).map(([t, d]) => t + d) },
      { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...MIDNIGHTS), delta).map(([t, d]) => t + d) },
      { weight: 2, arbitrary: inCluster },
      { weight: 1, arbitrary: fc.constantFrom(EARLIEST_INSTANT, LATEST_INSTANT) },
    );
    const window = fc.tuple(bound, bound, fc.constantFrom(...OFFSETS), fc.constantFrom(...OFFSETS), fc.boolean());
    let viaRollup = 0;
    let viaThreads = 0;
    let nonEmpty = 0;

    await fc.assert(
      fc.asyncProperty(window, async ([a, b, fromOffset, toOffset, short]) => {
        const [from, to] = a <= b ? [a, b] : [b, a];
        const extreme = (t: bigint) => t === EARLIEST_INSTANT || t === LATEST_INSTANT;
        const fromText = textOf(from, extreme(from) ? OFFSETS[0]! : fromOffset, short);
        const toText = textOf(to, extreme(to) ? OFFSETS[0]! : toOffset, short);
        // As the route passes them: read with parseInstant, written as ISO 8601 UTC with microseconds.
        const [fromIso, toIso] = [instantToIso(parseInstant(fromText)!), instantToIso(parseInstant(toText)!)];
        if (wholeUtcDays(from, to)) viaRollup++;
        else viaThreads++;

        const actual = await countNpsAnswers(db, workspaceId, parseInstant(fromIso)!, parseInstant(toIso)!);

        const expected = await referenceCount(workspaceId, fromText, toText);
        expect(actual, `${fromText} .. ${toText}`).toEqual(expected);
        if (expected.promotores + expected.neutros + expected.detratores > 0) nonEmpty++;
      }),
      { seed: SEED, numRuns: 400 },
    );
    expect(viaRollup).toBeGreaterThan(100);
    expect(viaThreads).toBeGreaterThan(50);
    expect(nonEmpty).toBeGreaterThan(200);
  });

  it('when the window is a whole year, then the answers of every day count, midnights included and the next midnight not', async () => {
    const { workspaceId, threadIds } = await workspaceWithThreads(5);
    const answers: Array<[string, number]> = [
      ['2025-01-01T00:00:00.000Z', 10],
      ['2025-06-15T12:00:00.000Z', 8],
      ['2025-12-31T23:59:59.999Z', 3],
      ['2024-12-31T23:59:59.999Z', 9],
      ['2026-01-01T00:00:00.000Z', 9],
    ];
    for (const [i, [answeredAt, score]] of answers.entries()) await setNpsAnswer(db, workspaceId, threadIds[i]!, score, new Date(answeredAt));

    const counts = await countNpsAnswers(db, workspaceId, parseInstant('2025-01-01T00:00:00.000000Z')!, parseInstant('2025-12-31T23:59:59.999999Z')!);

    expect(counts).toEqual({ promotores: 1, neutros: 1, detratores: 1 });
    expect(await dailyRows(workspaceId)).toEqual([
      { day: '2024-12-31', promotores: 1, neutros: 0, detratores: 0 },
      { day: '2025-01-01', promotores: 1, neutros: 0, detratores: 0 },
      { day: '2025-06-15', promotores: 0, neutros: 1, detratores: 0 },
      { day: '2025-12-31', promotores: 0, neutros: 0, detratores: 1 },
      { day: '2026-01-01', promotores: 1, neutros: 0, detratores: 0 },
    ]);
  });
});

describe('setNpsAnswer and nps_daily', () => {
  it('when many threads are answered at once on the same days, then each day counts every answer once', async () => {
    const { workspaceId, threadIds } = await workspaceWithThreads(60);
    const days = ['2026-03-01T10:00:00.000Z', '2026-03-02T00:00:00.000Z'];

    const results = await Promise.all(threadIds.map((id, i) => setNpsAnswer(db, workspaceId, id, i % 11, new Date(days[i % 2]!))));

    expect(results.every((thread) => thread?.npsScore !== null)).toBe(true);
    const expectedDay = (parity: number) => {
      const scores = threadIds.map((_, i) => i % 11).filter((_, i) => i % 2 === parity);
      return {
        promotores: scores.filter((s) => s >= 9).length,
        neutros: scores.filter((s) => s === 7 || s === 8).length,
        detratores: scores.filter((s) => s <= 6).length,
      };
    };
    expect(await dailyRows(workspaceId)).toEqual([
      { day: '2026-03-01', ...expectedDay(0) },
      { day: '2026-03-02', ...expectedDay(1) },
    ]);
  });

  it('when one thread is answered by several callers at once, then one answer is recorded and counted', async () => {
    const { workspaceId, threadIds } = await workspaceWithThreads(1);
    const scores = [10, 8, 0, 9, 7, 6, 10, 1];

    const results = await Promise.all(scores.map((score) => setNpsAnswer(db, workspaceId, threadIds[0]!, score, new Date('2026-03-05T08:00:00.000Z'))));

    const recorded = results.filter((thread) => thread !== undefined);
    expect(recorded).toHaveLength(1);
    const score = recorded[0]!.npsScore!;
    expect(await dailyRows(workspaceId)).toEqual([
      { day: '2026-03-05', promotores: score >= 9 ? 1 : 0, neutros: score === 7 || score === 8 ? 1 : 0, detratores: score <= 6 ? 1 : 0 },
    ]);
  });

  it('when the thread is already answered or unknown, then nothing is counted', async () => {
    const { workspaceId, threadIds } = await workspaceWithThreads(1);
    await setNpsAnswer(db, workspaceId, threadIds[0]!, 9, new Date('2026-03-05T08:00:00.000Z'));

    const second = await setNpsAnswer(db, workspaceId, threadIds[0]!, 0, new Date('2026-03-05T09:00:00.000Z'));
    const unknown = await setNpsAnswer(db, workspaceId, uuidv7(), 0, new Date('2026-03-05T09:00:00.000Z'));

    expect(second).toBeUndefined();
    expect(unknown).toBeUndefined();
    expect(await dailyRows(workspaceId)).toEqual([{ day: '2026-03-05', promotores: 1, neutros: 0, detratores: 0 }]);
  });
});

describe('wholeUtcDays', () => {
  it.each([
    ['2026-03-01T00:00:00Z', '2026-03-01T23:59:59.999999Z', { first: '2026-03-01', end: '2026-03-02' }],
    ['2026-03-01T00:00:00.000001Z', '2026-03-02T23:59:59.999999Z', { first: '2026-03-02', end: '2026-03-03' }],
    ['2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', { first: '2026-03-01', end: '2026-03-02' }],
    ['1969-12-31T00:00:00Z', '1970-01-01T23:59:59.999999Z', { first: '1969-12-31', end: '1970-01-02' }],
    ['1969-12-30T23:59:59.999999Z', '1969-12-31T23:59:59.999999Z', { first: '1969-12-31', end: '1970-01-01' }],
    ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z', { first: '0001-01-01', end: '10000-01-01' }],
  ])('when the window is %s .. %s, then the whole days are %o', (from, to, expected) => {
    expect(wholeUtcDays(at(from), at(to))).toMatchObject(expected);
  });

  it.each([
    ['2026-03-01T00:00:00Z', '2026-03-01T23:59:59.999998Z'],
    ['2026-03-01T00:00:00.000001Z', '2026-03-02T00:00:00Z'],
    ['1969-12-31T00:00:00.000001Z', '1970-01-01T00:00:00Z'],
    ['2026-03-01T12:00:00Z', '2026-03-01T12:00:00Z'],
  ])('when the window is %s .. %s, then no day is whole', (from, to) => {
    expect(wholeUtcDays(at(from), at(to))).toBeUndefined();
  });
});
