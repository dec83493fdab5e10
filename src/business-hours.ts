// A workspace's business hours: is an instant inside them, in the workspace's time zone, and are the
// hours and the zone well formed. Pure (Intl only, no I/O): the caller loads the settings
// (services/settings.ts loadSettings) and asks as often as it likes.
import type { components } from '../generated/api.js';

export type BusinessHours = components['schemas']['BusinessHours'];
export type Weekday = keyof BusinessHours;

/** The days of a week as BusinessHours names them, Monday first (the order the API writes them in). */
export const WEEKDAYS: readonly Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

const INTL_WEEKDAYS: Record<string, Weekday> = { Mon: 'mon', Tue: 'tue', Wed: 'wed', Thu: 'thu', Fri: 'fri', Sat: 'sat', Sun: 'sun' };

/**
 * How a time zone name is spelled (the contract's Timezone pattern): an IANA name such as
 * `America/Sao_Paulo`, `UTC` or `Etc/GMT+3`. Offsets (`+03:00`, `-0300`) are not names: Node 22 and
 * later take them as zones and Node 20 does not, so they are refused on every version.
 */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;

const MAX_CACHED_ZONES = 1000;

/** The weekday and the minute of the day (0..1439) on a zone's wall clocks. */
export interface LocalTime {
  weekday: Weekday;
  minute: number;
}

/** A zone's formatter, and the local time of the last UTC second read in it. */
interface Zone {
  formatter: Intl.DateTimeFormat;
  second: number;
  time: Readonly<LocalTime> | undefined;
}

const zones = new Map<string, Zone>();

/** A zone with its formatter of weekday, hour and minute, made once per zone (making one costs far more than using it). */
function zoneOf(timeZone: string): Zone {
  let zone = zones.get(timeZone);
  if (!zone) {
    const formatter = new Intl.DateTimeFormat('en-US', { timeZone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    zone = { formatter, second: NaN, time: undefined };
    // Names differ by case only as often as clients write them so: a bound keeps the cache small anyway.
    if (zones.size >= MAX_CACHED_ZONES) zones.clear();
    zones.set(timeZone, zone);
  }
  return zone;
}

/**
 * True when `name` is a time zone this Node knows by an IANA name: a zone (`America/Sao_Paulo`) or a
 * link to one (`Brazil/East`, `US/Eastern`, `Asia/Calcutta`, `UTC`). Intl matches names ignoring
 * case, as the tz database does.
 */
export function isTimeZoneName(name: string): boolean {
  if (name.length > 64 || !ZONE_NAME.test(name)) return false;
  try {
    zoneOf(name);
    return true;
  } catch {
    return false;
  }
}

/** Minutes after midnight of a local time `HH:MM` (00:00..24:00); NaN when it is not one. */
export function minutesOf(time: string | undefined): number {
  const match = /^(\d\d):(\d\d)$/.exec(time ?? '');
  if (!match) return NaN;
  const hours = Number(match[1]);
  const minutes = Number(match[2]);
  if (minutes > 59 || hours > 24 || (hours === 24 && minutes > 0)) return NaN;
  return hours * 60 + minutes;
}

/** The weekday and the minute of the day (0..1439) on the wall clocks of the zone at `instant`. */
export function localTime(timeZone: string, instant: Date | number): Readonly<LocalTime> {
  // Every zone's offset is whole seconds, so one UTC second is one local minute: the last second
  // read is answered again without formatting (a message's automations ask once each).
  const zone = zoneOf(timeZone);
  const second = Math.floor(Number(instant) / 1000);
  if (zone.time && zone.second === second) return zone.time;
  const time = Object.freeze(formattedTime(zone.formatter, timeZone, instant));
  zone.second = second;
  zone.time = time;
  return time;
}

/** The local time as the zone's formatter writes it. */
function formattedTime(formatter: Intl.DateTimeFormat, timeZone: string, instant: Date | number): LocalTime {
  let weekday: Weekday | undefined;
  let hour = NaN;
  let minute = NaN;
  for (const part of formatter.formatToParts(instant)) {
    if (part.type === 'weekday') weekday = INTL_WEEKDAYS[part.value];
    else if (part.type === 'hour') hour = Number(part.value) % 24;
    else if (part.type === 'minute') minute = Number(part.value);
  }
  if (weekday === undefined || Number.isNaN(hour) || Number.isNaN(minute)) throw new Error(`cannot read the local time in ${timeZone}`);
  return { weekday, minute: hour * 60 + minute };
}

/**
 * Whether `instant` falls inside the business hours, read on the wall clocks of `timezone`: on the
 * local weekday, some interval [start, end) holds the local time (start inclusive, end exclusive, to
 * the minute: 09:00-18:00 holds 09:00:00 and 17:59:59.999, not 18:00). An interval ending at 24:00
 * holds the day's last minute; 00:00 belongs to the next day. Across a change of the clocks the wall
 * clock decides: a local time skipped in spring never happens, one repeated in autumn counts both
 * times. Throws a RangeError for a zone Intl does not know (settings are checked when written).
 */
export function isBusinessHours(settings: { timezone: string; businessHours: BusinessHours }, instant: Date | number): boolean {
  const { weekday, minute } = localTime(settings.timezone, instant);
  return settings.businessHours[weekday].some(([start, end]) => minutesOf(start) <= minute && minute < minutesOf(end));
}

/** A problem of a business hours value, where it is: `path` under the object (`/mon/1`). */
export interface HoursProblem {
  path: string;
  message: string;
}

/**
 * What the contract cannot say about business hours: each interval starts before it ends (no
 * overnight interval: split it at midnight), and a day's intervals do not overlap (touching, as
 * 09:00-12:00 and 12:00-18:00, is fine). Times, their form and the number of intervals a day are
 * the contract's. Answers nothing when the hours are good.
 */
export function businessHoursProblems(hours: BusinessHours): HoursProblem[] {
  const problems: HoursProblem[] = [];
  for (const day of WEEKDAYS) {
    const intervals = hours[day].map(([start, end], index) => ({ index, start: minutesOf(start), end: minutesOf(end), text: `${start}-${end}` }));
    for (const interval of intervals) {
      if (!(interval.start < interval.end)) {
        problems.push({
          path: `/${day}/${interval.index}`,
          message: 'must start before it ends (an interval cannot cross midnight: split it at 24:00 and 00:00)',
        });
      }
    }
    const ordered = intervals.filter((i) => i.start < i.end).sort((a, b) => a.start - b.start || a.index - b.index);
    // The interval reaching furthest so far: a later start before its end overlaps it.
    let reach = ordered[0];
    for (const current of ordered.slice(1)) {
      if (current.start < reach!.end) {
        const [first, second] = reach!.index < current.index ? [reach!, current] : [current, reach!];
        problems.push({ path: `/${day}/${second.index}`, message: `must not overlap ${first.text} (interval ${first.index})` });
      }
      if (current.end > reach!.end) reach = current;
    }
  }
  return problems;
}
