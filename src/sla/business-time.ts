// Time counted in a workspace's business hours: the instant a number of business minutes after a
// start (a due time under `businessHoursOnly`), and the business time between two instants (a
// response's duration for the report). Pure: walks the wall clock of the workspace's zone interval
// by interval (never minute by minute), so a year of targets costs a few thousand steps at most.
// Across a change of the clocks the step that crosses it is off by the change, as the wall clock is.
import { localTime, minutesOf, type BusinessHours } from '../business-hours.js';

export interface Hours {
  timezone: string;
  businessHours: BusinessHours;
}

const MINUTE = 60_000;
/** Enough steps for a year of business time in any week with at least one business minute. */
const MAX_STEPS = 100_000;

/** Whether the week has any business time at all. */
const hasHours = (hours: Hours): boolean => Object.values(hours.businessHours).some((day) => day.length > 0);

/**
 * Where the instant `t` stands: inside an interval (`inside` ms of it left) or outside (`until` ms to
 * the next interval start of the day, or to the day's end).
 */
function standing(hours: Hours, t: number): { inside: boolean; ms: number } {
  const { weekday, minute } = localTime(hours.timezone, t);
  const intoMinute = ((t % MINUTE) + MINUTE) % MINUTE;
  const intervals = hours.businessHours[weekday].map(([start, end]) => [minutesOf(start), minutesOf(end)] as const).sort((a, b) => a[0] - b[0]);
  for (const [start, end] of intervals) {
    if (start <= minute && minute < end) return { inside: true, ms: (end - minute) * MINUTE - intoMinute };
    if (minute < start) return { inside: false, ms: (start - minute) * MINUTE - intoMinute };
  }
  return { inside: false, ms: (1440 - minute) * MINUTE - intoMinute };
}

/** The instant `minutes` of business time after `start`; calendar time when the week has no business hours. */
export function addBusinessMinutes(hours: Hours, start: Date, minutes: number): Date {
  let left = minutes * MINUTE;
  if (!hasHours(hours)) return new Date(start.getTime() + left);
  let t = start.getTime();
  for (let step = 0; step < MAX_STEPS; step++) {
    const here = standing(hours, t);
    if (here.inside) {
      if (left <= here.ms) return new Date(t + left);
      left -= here.ms;
    }
    t += Math.max(here.ms, 1);
  }
  return new Date(t + left);
}

/** The business time from `from` to `to`, in milliseconds (0 when `to` is not after `from`). */
export function businessMsBetween(hours: Hours, from: Date, to: Date): number {
  if (!hasHours(hours)) return Math.max(0, to.getTime() - from.getTime());
  let t = from.getTime();
  const end = to.getTime();
  let total = 0;
  for (let step = 0; step < MAX_STEPS && t < end; step++) {
    const here = standing(hours, t);
    const span = Math.min(Math.max(here.ms, 1), end - t);
    if (here.inside) total += span;
    t += span;
  }
  return total;
}

/** The due time of a target of `minutes` from `start`: in business time when `businessHoursOnly` (then `hours` are needed). */
export function dueAfter(hours: Hours | undefined, start: Date, minutes: number, businessHoursOnly: boolean): Date {
  if (!businessHoursOnly) return new Date(start.getTime() + minutes * MINUTE);
  if (!hours) throw new Error('a due time in business hours needs the business hours');
  return addBusinessMinutes(hours, start, minutes);
}
