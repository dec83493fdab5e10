// Instants of the API: RFC 3339 date-times read to PostgreSQL's microsecond precision, written back
// as ISO 8601, and the whole UTC days of a window. Pure, shared by the NPS handlers and queries.

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2})(?::?(\d{2}))?)$/i;

/**
 * Reads a date-time the contract accepted: RFC 3339 as ajv-formats checks it, so hour-only offsets
 * (`-03`), a leap second (`23:59:60`, read as the next second, as PostgreSQL does) and any number
 * of fraction digits, all of which `Date.parse` gets wrong (NaN, or milliseconds only). Answers
 * microseconds since the epoch (PostgreSQL's precision; further digits are dropped), or undefined
 * for text that is not a date-time.
 */
export function parseInstant(text: string): bigint | undefined {
  const match = DATE_TIME.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction = '', sign, offsetHours = '0', offsetMinutes = '0'] = match;
  const date = new Date(0);
  date.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
  date.setUTCHours(Number(hour), Number(minute), Number(second), 0);
  const offset = (sign === '-' ? -1n : 1n) * BigInt(Number(offsetHours) * 60 + Number(offsetMinutes));
  const subMillisecondMicros = BigInt(fraction.padEnd(6, '0').slice(0, 6));
  return (BigInt(date.getTime()) - offset * 60_000n) * 1000n + subMillisecondMicros;
}

/** 0001-01-01T00:00:00Z: earlier instants are not stored (PostgreSQL reads year 0000 as out of range). */
export const EARLIEST_INSTANT = parseInstant('0001-01-01T00:00:00Z')!;

/** The instant as a Date, to the millisecond. */
export function instantToDate(micros: bigint): Date {
  const millis = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
  return new Date(Number(millis));
}

/** The instant as ISO 8601 UTC with microseconds, which PostgreSQL reads exactly. */
export function instantToIso(micros: bigint): string {
  const date = instantToDate(micros);
  const extraMicros = micros - BigInt(date.getTime()) * 1000n;
  return `${date.toISOString().replace(/^\+0*/, '').slice(0, -1)}${extraMicros.toString().padStart(3, '0')}Z`;
}

const DAY_MICROS = 86_400_000_000n;

/** a / b rounded down (BigInt division rounds toward zero, wrong for instants before 1970). */
const floorDiv = (a: bigint, b: bigint): bigint => a / b - (a % b < 0n ? 1n : 0n);

/** Whole UTC days [first, end) of a window, and their midnights. */
export interface WholeUtcDays {
  /** The first whole day, YYYY-MM-DD. */
  first: string;
  /** The day after the last whole day, YYYY-MM-DD. */
  end: string;
  /** Midnight starting `first`, ISO 8601 UTC with microseconds. */
  firstStart: string;
  /** Midnight starting `end`, ISO 8601 UTC with microseconds. */
  endStart: string;
}

/**
 * The UTC days lying wholly inside [from, to] (microseconds, both bounds inclusive): a day is whole
 * when its first microsecond is >= from and its last <= to. Undefined when no day is.
 */
export function wholeUtcDays(from: bigint, to: bigint): WholeUtcDays | undefined {
  const first = -floorDiv(-from, DAY_MICROS);
  const end = floorDiv(to + 1n, DAY_MICROS);
  if (first >= end) return undefined;
  const firstStart = instantToIso(first * DAY_MICROS);
  const endStart = instantToIso(end * DAY_MICROS);
  return { first: firstStart.split('T')[0]!, end: endStart.split('T')[0]!, firstStart, endStart };
}
