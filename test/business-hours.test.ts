// Business hours, without a server: the local weekday and time in a workspace's time zone across
// changes of the clocks (New York and Lisbon; Brazil has none now), across midnight, at the edges of
// intervals (start inclusive, end exclusive), and which time zone names and intervals are accepted.
import { describe, expect, it } from 'vitest';
import { businessHoursProblems, isBusinessHours, isTimeZoneName, localTime, minutesOf, type BusinessHours } from '../src/business-hours.js';
import { DEFAULT_SETTINGS } from '../src/services/settings.js';

const closed: BusinessHours = { mon: [], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] };
const at = (iso: string): Date => new Date(iso);
const open = (timezone: string, businessHours: Partial<BusinessHours>, instant: string): boolean =>
  isBusinessHours({ timezone, businessHours: { ...closed, ...businessHours } }, at(instant));
const defaults = (timezone: string, instant: string): boolean => isBusinessHours({ timezone, businessHours: DEFAULT_SETTINGS.businessHours }, at(instant));

describe('isBusinessHours: the edges of an interval', () => {
  it.each([
    ['2026-11-23T11:59:59.999Z', 'Monday 08:59:59.999', false],
    ['2026-11-23T12:00:00.000Z', 'Monday 09:00, the start', true],
    ['2026-11-23T20:59:59.999Z', 'Monday 17:59:59.999', true],
    ['2026-11-23T21:00:00.000Z', 'Monday 18:00, the end', false],
  ])('when it is %s (%s in São Paulo) and the hours are the defaults, then it answers %s', (instant, _local, expected) => {
    expect(defaults('America/Sao_Paulo', instant)).toBe(expected);
  });

  it('when two intervals touch (12:00-13:00 and 13:00-14:00), then 13:00 is inside the second', () => {
    const hours = {
      tue: [
        ['12:00', '13:00'],
        ['13:00', '14:00'],
      ],
    };

    expect(open('UTC', hours, '2026-11-24T12:59:59.999Z')).toBe(true);
    expect(open('UTC', hours, '2026-11-24T13:00:00.000Z')).toBe(true);
    expect(open('UTC', hours, '2026-11-24T14:00:00.000Z')).toBe(false);
  });

  it('when a lunch break splits the day, then the break is outside', () => {
    const hours = {
      wed: [
        ['13:00', '18:00'],
        ['08:00', '12:00'],
      ],
    };

    expect(open('America/Sao_Paulo', hours, '2026-11-25T14:30:00Z')).toBe(true);
    expect(open('America/Sao_Paulo', hours, '2026-11-25T15:30:00Z')).toBe(false);
    expect(open('America/Sao_Paulo', hours, '2026-11-25T16:00:00Z')).toBe(true);
  });
});

describe('isBusinessHours: across midnight', () => {
  const lateFriday = { fri: [['18:00', '24:00']] };

  it('when Friday is open until 24:00, then 23:59 on Friday is inside and 00:00 on Saturday (closed) is not', () => {
    expect(open('America/Sao_Paulo', lateFriday, '2026-11-28T02:59:00.000Z')).toBe(true);
    expect(open('America/Sao_Paulo', lateFriday, '2026-11-28T02:59:59.999Z')).toBe(true);
    expect(open('America/Sao_Paulo', lateFriday, '2026-11-28T03:00:00.000Z')).toBe(false);
  });

  it('when Saturday opens at 00:00, then 00:00 belongs to Saturday', () => {
    const hours = { ...lateFriday, sat: [['00:00', '02:00']] };

    expect(open('America/Sao_Paulo', hours, '2026-11-28T03:00:00.000Z')).toBe(true);
    expect(open('America/Sao_Paulo', hours, '2026-11-28T04:59:59.999Z')).toBe(true);
    expect(open('America/Sao_Paulo', hours, '2026-11-28T05:00:00.000Z')).toBe(false);
  });

  it('when the UTC date is already Saturday but São Paulo is still on Friday, then Friday’s hours apply', () => {
    expect(localTime('America/Sao_Paulo', at('2026-11-28T01:30:00Z'))).toEqual({ weekday: 'fri', minute: 22 * 60 + 30 });
    expect(open('America/Sao_Paulo', lateFriday, '2026-11-28T01:30:00Z')).toBe(true);
  });

  it('when it is midnight, then the local minute is 0, not 24:00', () => {
    expect(localTime('UTC', at('2026-11-29T00:00:00Z'))).toEqual({ weekday: 'sun', minute: 0 });
  });

  it('when a day is empty (the defaults’ Saturday and Sunday), then no time of it is inside', () => {
    for (const instant of ['2026-11-28T03:00:00Z', '2026-11-28T15:00:00Z', '2026-11-29T15:00:00Z', '2026-11-30T02:59:59.999Z']) {
      expect(defaults('America/Sao_Paulo', instant), instant).toBe(false);
    }
    expect(defaults('America/Sao_Paulo', '2026-11-30T12:00:00Z')).toBe(true);
  });
});

describe('isBusinessHours: across a change of the clocks elsewhere', () => {
  it('when New York springs forward (2026-03-08), then 09:00 is 14:00Z the Friday before and 13:00Z the Monday after', () => {
    expect(defaults('America/New_York', '2026-03-06T13:59:59.999Z')).toBe(false);
    expect(defaults('America/New_York', '2026-03-06T14:00:00Z')).toBe(true);
    expect(defaults('America/New_York', '2026-03-09T12:59:59.999Z')).toBe(false);
    expect(defaults('America/New_York', '2026-03-09T13:00:00Z')).toBe(true);
    expect(defaults('America/New_York', '2026-03-09T22:00:00Z')).toBe(false);
  });

  it('when the clocks skip 02:00-03:00 that Sunday, then an interval in the gap never holds and 03:00 follows 01:59', () => {
    const hours = { sun: [['02:00', '03:00']] };
    const after = { sun: [['03:00', '04:00']] };

    expect(localTime('America/New_York', at('2026-03-08T06:59:59Z'))).toEqual({ weekday: 'sun', minute: 1 * 60 + 59 });
    expect(localTime('America/New_York', at('2026-03-08T07:00:00Z'))).toEqual({ weekday: 'sun', minute: 3 * 60 });
    for (let minute = 0; minute < 24 * 60; minute += 15) {
      const instant = new Date(Date.parse('2026-03-08T04:00:00Z') + minute * 60_000).toISOString();
      expect(open('America/New_York', hours, instant), instant).toBe(false);
    }
    expect(open('America/New_York', after, '2026-03-08T06:59:59Z')).toBe(false);
    expect(open('America/New_York', after, '2026-03-08T07:00:00Z')).toBe(true);
    expect(open('America/New_York', after, '2026-03-08T07:59:59.999Z')).toBe(true);
    expect(open('America/New_York', after, '2026-03-08T08:00:00Z')).toBe(false);
  });

  it('when New York falls back (2026-11-01), then 01:00-02:00 happens twice and both count; Monday 09:00 is 14:00Z', () => {
    const hours = { sun: [['01:00', '02:00']] };

    expect(open('America/New_York', hours, '2026-11-01T04:59:59Z')).toBe(false);
    expect(open('America/New_York', hours, '2026-11-01T05:30:00Z')).toBe(true);
    expect(open('America/New_York', hours, '2026-11-01T06:30:00Z')).toBe(true);
    expect(localTime('America/New_York', at('2026-11-01T05:30:00Z'))).toEqual(localTime('America/New_York', at('2026-11-01T06:30:00Z')));
    expect(open('America/New_York', hours, '2026-11-01T07:00:00Z')).toBe(false);
    expect(defaults('America/New_York', '2026-11-02T13:59:59.999Z')).toBe(false);
    expect(defaults('America/New_York', '2026-11-02T14:00:00Z')).toBe(true);
  });

  it('when Lisbon changes its clocks (2026-03-29 and 2026-10-25), then Monday 09:00 is 09:00Z, 08:00Z, then 09:00Z again', () => {
    expect(defaults('Europe/Lisbon', '2026-03-23T08:59:59.999Z')).toBe(false);
    expect(defaults('Europe/Lisbon', '2026-03-23T09:00:00Z')).toBe(true);
    expect(defaults('Europe/Lisbon', '2026-03-30T07:59:59.999Z')).toBe(false);
    expect(defaults('Europe/Lisbon', '2026-03-30T08:00:00Z')).toBe(true);
    expect(defaults('Europe/Lisbon', '2026-03-30T17:00:00Z')).toBe(false);
    expect(defaults('Europe/Lisbon', '2026-10-26T08:59:59.999Z')).toBe(false);
    expect(defaults('Europe/Lisbon', '2026-10-26T09:00:00Z')).toBe(true);
  });

  it('when the zone is São Paulo, then 09:00 is 12:00Z in January and in July (no daylight saving time)', () => {
    for (const day of ['2026-01-05', '2026-07-06']) {
      expect(defaults('America/Sao_Paulo', `${day}T11:59:59.999Z`)).toBe(false);
      expect(defaults('America/Sao_Paulo', `${day}T12:00:00Z`)).toBe(true);
    }
  });

  it('when the zone is named by a link (Brazil/East) or is UTC or Etc/GMT+3, then it counts the hours of its zone', () => {
    expect(localTime('Brazil/East', at('2026-11-23T12:00:00Z'))).toEqual(localTime('America/Sao_Paulo', at('2026-11-23T12:00:00Z')));
    expect(localTime('Etc/GMT+3', at('2026-11-23T12:00:00Z'))).toEqual({ weekday: 'mon', minute: 9 * 60 });
    expect(defaults('UTC', '2026-11-23T09:00:00Z')).toBe(true);
    expect(defaults('UTC', '2026-11-23T18:00:00Z')).toBe(false);
  });

  it('when asked with a number of milliseconds, then it answers as for the Date', () => {
    const instant = Date.parse('2026-11-23T12:00:00Z');

    expect(isBusinessHours({ timezone: 'America/Sao_Paulo', businessHours: DEFAULT_SETTINGS.businessHours }, instant)).toBe(true);
  });

  it("when asked again within one second and then at the next, in a zone whose offset has seconds (Monrovia, -00:44:30 until 1972), then each answer is the wall clock's", () => {
    // The last second read is answered again without formatting: the local minute changes only on a whole UTC second.
    expect(localTime('Africa/Monrovia', at('1971-06-01T12:44:29.000Z'))).toEqual({ weekday: 'tue', minute: 11 * 60 + 59 });
    expect(localTime('Africa/Monrovia', at('1971-06-01T12:44:29.999Z'))).toEqual({ weekday: 'tue', minute: 11 * 60 + 59 });
    expect(localTime('Africa/Monrovia', at('1971-06-01T12:44:30.000Z'))).toEqual({ weekday: 'tue', minute: 12 * 60 });
    expect(localTime('Africa/Monrovia', at('1971-06-01T12:44:29.500Z'))).toEqual({ weekday: 'tue', minute: 11 * 60 + 59 });
  });
});

describe('isTimeZoneName', () => {
  it.each([
    'America/Sao_Paulo',
    'America/Manaus',
    'America/New_York',
    'Europe/Lisbon',
    'UTC',
    'Etc/UTC',
    'GMT',
    'Etc/GMT+3',
    'Brazil/East',
    'US/Eastern',
    'Asia/Kolkata',
    'Asia/Calcutta',
    'Europe/Kyiv',
    'America/Argentina/Buenos_Aires',
    'America/Port-au-Prince',
  ])('when the name is %s, then it is a time zone', (name) => {
    expect(isTimeZoneName(name)).toBe(true);
  });

  it.each([
    '',
    '+03:00',
    '-0300',
    '-03',
    'Z',
    'Local',
    'Mars/Olympus',
    'America/Sao Paulo',
    'America//Sao_Paulo',
    '/UTC',
    'UTC/',
    'America/Sao_Paulo\u0000',
    'A'.repeat(65),
  ])('when the name is %j, then it is not', (name) => {
    expect(isTimeZoneName(name)).toBe(false);
  });
});

describe('businessHoursProblems', () => {
  const hours = (mon: string[][]): BusinessHours => ({ ...closed, mon });

  it('when the intervals are in any order, touch, or end at 24:00, then there is no problem', () => {
    expect(businessHoursProblems(DEFAULT_SETTINGS.businessHours)).toEqual([]);
    expect(
      businessHoursProblems(
        hours([
          ['13:00', '18:00'],
          ['00:00', '12:00'],
          ['12:00', '13:00'],
          ['18:00', '24:00'],
        ]),
      ),
    ).toEqual([]);
  });

  it('when an interval ends before it starts or where it starts, then it is named', () => {
    expect(businessHoursProblems({ ...closed, fri: [['22:00', '02:00']], sat: [['09:00', '09:00']] })).toEqual([
      { path: '/fri/0', message: 'must start before it ends (an interval cannot cross midnight: split it at 24:00 and 00:00)' },
      { path: '/sat/0', message: 'must start before it ends (an interval cannot cross midnight: split it at 24:00 and 00:00)' },
    ]);
  });

  it('when intervals overlap, then the later one of the body is named with the one it overlaps', () => {
    expect(
      businessHoursProblems(
        hours([
          ['09:00', '18:00'],
          ['12:00', '13:00'],
        ]),
      ),
    ).toEqual([{ path: '/mon/1', message: 'must not overlap 09:00-18:00 (interval 0)' }]);
    expect(
      businessHoursProblems(
        hours([
          ['12:00', '13:00'],
          ['09:00', '12:01'],
        ]),
      ),
    ).toEqual([{ path: '/mon/1', message: 'must not overlap 12:00-13:00 (interval 0)' }]);
  });

  it('when one long interval holds two short ones, then both short ones are named', () => {
    expect(
      businessHoursProblems(
        hours([
          ['08:00', '20:00'],
          ['09:00', '10:00'],
          ['12:00', '13:00'],
        ]),
      ),
    ).toEqual([
      { path: '/mon/1', message: 'must not overlap 08:00-20:00 (interval 0)' },
      { path: '/mon/2', message: 'must not overlap 08:00-20:00 (interval 0)' },
    ]);
  });

  it('when two intervals are the same, then the second is named', () => {
    expect(
      businessHoursProblems(
        hours([
          ['09:00', '12:00'],
          ['09:00', '12:00'],
        ]),
      ),
    ).toEqual([{ path: '/mon/1', message: 'must not overlap 09:00-12:00 (interval 0)' }]);
  });
});

describe('minutesOf', () => {
  it('when given HH:MM from 00:00 to 24:00, then it answers the minutes after midnight; anything else is NaN', () => {
    expect([minutesOf('00:00'), minutesOf('09:30'), minutesOf('23:59'), minutesOf('24:00')]).toEqual([0, 570, 1439, 1440]);
    for (const text of ['24:01', '25:00', '9:00', '09:60', '09:00:00', '', undefined]) expect(minutesOf(text), String(text)).toBeNaN();
  });
});
