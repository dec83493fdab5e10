// A JSON text's bytes read before JSON.parse: whether it nests deeper than the service takes, and
// whether it escapes a surrogate. Loops and native searches, no recursion: a body costs time in
// proportion to its length and a constant amount of stack, however deep it nests.
import { ApiError } from './errors.js';

/**
 * How deep arrays and objects may nest in a JSON body the service parses (the API's request bodies
 * and Meta's webhook deliveries), far deeper than any of them needs. Deeper text is refused before
 * it is parsed: recursive code over the parsed value (JSON.stringify among it) runs out of stack on
 * deep enough input, and such a RangeError, thrown in a callback, ends the process.
 */
export const MAX_JSON_DEPTH = 32;

export interface JsonScan {
  /** Arrays and objects nest deeper than the limit. */
  tooDeep: boolean;
  /**
   * The text holds a `\uD800`-`\uDFFF` escape: half of a pair, or a lone surrogate, so its strings
   * need a look once parsed (or an escaped backslash before such text: the look then finds nothing).
   */
  surrogateEscape: boolean;
  /**
   * The text holds at least `maxMembers` commas, so an array or object in it may hold more members
   * than that (one of N members has N - 1 commas): its parsed value needs a look. Fewer never does.
   */
  mayBeWider: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;

/** How often `byte` occurs, counted up to `atMost` (Buffer#indexOf searches natively). */
function countUpTo(bytes: Buffer, byte: number, atMost: number): number {
  let count = 0;
  for (let at = bytes.indexOf(byte); at !== -1 && count < atMost; at = bytes.indexOf(byte, at + 1)) count++;
  return count;
}

/** `\u` then `d`/`D` then one of `89abcdefABCDEF`: the start of a `\uD800`-`\uDFFF` escape. */
function hasSurrogateEscape(bytes: Buffer): boolean {
  for (let at = bytes.indexOf('\\u', 0, 'latin1'); at !== -1; at = bytes.indexOf('\\u', at + 2, 'latin1')) {
    const first = bytes[at + 2];
    const second = bytes[at + 3];
    const hex = second === undefined ? 0 : second | 0x20; // a-f and A-F alike
    if ((first === 0x64 || first === 0x44) && (hex === 0x38 || hex === 0x39 || (hex >= 0x61 && hex <= 0x66))) return true;
  }
  return false;
}

/** Walks the brackets outside strings, stopping once `maxDepth` is passed. */
function nestsDeeperThan(bytes: Buffer, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === QUOTE) {
      // To the closing quote, over escapes (an escaped quote among them).
      for (i++; i < bytes.length && bytes[i] !== QUOTE; i++) if (bytes[i] === BACKSLASH) i++;
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (++depth > maxDepth) return true;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

/**
 * Scans UTF-8 JSON text (brackets, quotes and backslashes are single bytes there, never part of
 * another character). Exact for valid JSON; on broken JSON the answer does not matter, JSON.parse
 * refuses it. Most bodies hold fewer brackets than the limit, anywhere: those are not walked.
 */
export function scanJson(bytes: Buffer, maxDepth: number = MAX_JSON_DEPTH, maxMembers: number = Infinity): JsonScan {
  const openers = countUpTo(bytes, OPEN_ARRAY, maxDepth + 1) + countUpTo(bytes, OPEN_OBJECT, maxDepth + 1);
  return {
    tooDeep: openers > maxDepth && nestsDeeperThan(bytes, maxDepth),
    surrogateEscape: hasSurrogateEscape(bytes),
    mayBeWider: maxMembers !== Infinity && countUpTo(bytes, COMMA, maxMembers) >= maxMembers,
  };
}

/** The 400 for a body nested deeper than MAX_JSON_DEPTH (a body check, before the contract's). */
export function tooDeep(): ApiError {
  return new ApiError(400, 'invalid_json', `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`);
}
