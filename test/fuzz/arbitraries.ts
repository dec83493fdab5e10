// Translates the JSON Schemas of openapi.yaml into fast-check arbitraries: valid values built
// constructively from each schema, and mutations that break one rule of a valid value.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';

export type Schema = Record<string, any>;

/**
 * One change that makes a valid value invalid; plain data, so a counterexample prints readably.
 * `mixed`: a field of one branch of a oneOf set beside another branch's fields, where either is the
 * one out of place: the validator may name the field set or any field of the object beside it
 * (`/body/trigger/minutes` for `{event: 'sla.warning', minutes, waitingOn}`).
 */
export type Mutation = { op: 'set'; pointer: string[]; value: unknown; what: string; mixed?: true } | { op: 'delete'; pointer: string[]; what: string };

// ---------------------------------------------------------------------------------------------
// Characters and strings, counted in code points as JSON Schema counts them.

const INTERESTING = [
  0x09, 0x0a, 0x0d, 0x22, 0x25, 0x27, 0x2b, 0x5c, 0x5f, 0x7f, 0xa0, 0xad, 0x130, 0x212a, 0x301, 0x200b, 0x200d, 0x2028, 0x2029, 0xfeff, 0xfffd, 0xffff, 0x1f600,
  0x1f1e7, 0x10ffff,
];

/** Any Unicode scalar value (no lone surrogates), biased towards ASCII and awkward characters. */
const codePoint: fc.Arbitrary<number> = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x01, max: 0x1f }) },
  { weight: 2, arbitrary: fc.integer({ min: 0xa0, max: 0x2fff }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x3000, max: 0xd7ff }) },
  { weight: 1, arbitrary: fc.integer({ min: 0xe000, max: 0xfffd }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x10000, max: 0x10ffff }) },
  { weight: 2, arbitrary: fc.constantFrom(...INTERESTING) },
);

const cpLength = (s: string): number => [...s].length;

/** A body string with a lone surrogate somewhere (JSON.stringify sends it as a \uD800 escape). */
function withLoneSurrogate(strings: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc
    .tuple(strings, fc.integer({ min: 0xd800, max: 0xdfff }), fc.nat())
    .map(([v, unit, at]) => {
      const i = at % (v.length + 1);
      return `${v.slice(0, i)}${String.fromCharCode(unit)}${v.slice(i)}`;
    })
    .filter((v) => !v.isWellFormed());
}

/** False when any string (or key) in the value holds a lone surrogate. */
function wellFormed(value: unknown): boolean {
  if (typeof value === 'string') return value.isWellFormed();
  if (typeof value !== 'object' || value === null) return true;
  return Object.entries(value).every(([key, item]) => key.isWellFormed() && wellFormed(item));
}

/** A length in [min, max]: mostly short, sometimes exactly a bound. */
function lengthIn(min: number, max: number): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min, max: Math.min(max, min + 16) }) },
    { weight: 1, arbitrary: fc.constantFrom(min, max) },
    { weight: 1, arbitrary: fc.integer({ min, max }) },
  );
}

const fromCodePoints = (chars: fc.Arbitrary<number>, length: number): fc.Arbitrary<string> =>
  fc.array(chars, { minLength: length, maxLength: length }).map((cps) => String.fromCodePoint(...cps));

function stringOf(chars: fc.Arbitrary<number>, min: number, max: number): fc.Arbitrary<string> {
  return lengthIn(min, max).chain((n) => fromCodePoints(chars, n));
}

// ---------------------------------------------------------------------------------------------
// Patterns: a constructive generator for the regular-expression subset the contract uses
// (^...$ around literals, escapes, \d, [classes] and [^negated] classes with quantifiers).

interface CharSet {
  negated: boolean;
  ranges: Array<[number, number]>;
}
interface Atom {
  set: CharSet;
  min: number;
  max: number;
}

const inSet = (set: CharSet, cp: number): boolean => set.ranges.some(([lo, hi]) => cp >= lo && cp <= hi) !== set.negated;

function readEscape(source: string, i: number): { ranges: Array<[number, number]>; next: number } {
  const c = source[i + 1]!;
  if (c === 'd') return { ranges: [[0x30, 0x39]], next: i + 2 };
  if (c === 'u') {
    const cp = parseInt(source.slice(i + 2, i + 6), 16);
    return { ranges: [[cp, cp]], next: i + 6 };
  }
  if (/[a-zA-Z]/.test(c)) throw new Error(`unsupported escape \\${c}`);
  const cp = c.codePointAt(0)!;
  return { ranges: [[cp, cp]], next: i + 2 };
}

/** The pattern's atoms, or undefined when it uses more than the supported subset. */
function parsePattern(source: string): Atom[] | undefined {
  if (!source.startsWith('^') || !source.endsWith('$')) return undefined;
  const atoms: Atom[] = [];
  const end = source.length - 1;
  try {
    let i = 1;
    while (i < end) {
      let set: CharSet;
      const c = source[i]!;
      if (c === '[') {
        const negated = source[i + 1] === '^';
        i += negated ? 2 : 1;
        const ranges: Array<[number, number]> = [];
        while (source[i] !== ']') {
          let lo: Array<[number, number]>;
          if (source[i] === '\\') ({ ranges: lo, next: i } = readEscape(source, i));
          else lo = [[source.codePointAt(i)!, source.codePointAt(i++)!]];
          if (source[i] === '-' && source[i + 1] !== ']' && lo.length === 1 && lo[0]![0] === lo[0]![1]) {
            const hi = source[i + 1] === '\\' ? readEscape(source, i + 1) : { ranges: [[source.codePointAt(i + 1)!, 0] as [number, number]], next: i + 2 };
            ranges.push([lo[0]![0], hi.ranges[0]![0]]);
            i = hi.next;
          } else ranges.push(...lo);
        }
        i++;
        set = { negated, ranges };
      } else if (c === '\\') {
        const escape = readEscape(source, i);
        set = { negated: false, ranges: escape.ranges };
        i = escape.next;
      } else if ('()|.?*+{}'.includes(c)) {
        return undefined;
      } else {
        set = { negated: false, ranges: [[c.codePointAt(0)!, c.codePointAt(0)!]] };
        i++;
      }
      let min = 1;
      let max = 1;
      const q = source[i];
      if (q === '*' || q === '+' || q === '?') {
        [min, max] = q === '*' ? [0, Infinity] : q === '+' ? [1, Infinity] : [0, 1];
        i++;
      } else if (q === '{') {
        const close = source.indexOf('}', i);
        const [a, b] = source.slice(i + 1, close).split(',');
        min = Number(a);
        max = b === undefined ? min : b === '' ? Infinity : Number(b);
        i = close + 1;
      }
      atoms.push({ set, min, max });
    }
  } catch {
    return undefined;
  }
  return atoms;
}

function charOf(set: CharSet): fc.Arbitrary<number> {
  if (set.negated) return codePoint.filter((cp) => inSet(set, cp));
  return fc.constantFrom(...set.ranges).chain(([lo, hi]) => fc.integer({ min: lo, max: hi }));
}

function atomsString(atoms: Atom[], counts: number[]): fc.Arbitrary<string> {
  return fc.tuple(...atoms.map((atom, k) => fromCodePoints(charOf(atom.set), counts[k]!))).map((parts) => parts.join(''));
}

/** A string matching `^atoms$`; an unbounded atom is bounded by the schema's lengths. */
function matchingPattern(atoms: Atom[], minLength: number, maxLength: number): fc.Arbitrary<string> {
  const counts = atoms.map((atom) => {
    const hi = Number.isFinite(atom.max) ? atom.max : Math.max(atom.min, maxLength);
    const lo = atoms.length === 1 ? Math.max(atom.min, minLength) : atom.min;
    return lengthIn(lo, Math.min(hi, atoms.length === 1 ? maxLength : hi));
  });
  return fc.tuple(...counts).chain((n) => atomsString(atoms, n));
}

const FOREIGN_CANDIDATES = [0x00, 0x61, 0x67, 0x20, 0x23, 0x2d, 0xe9, 0x1f600, 0x2b, 0x30, 0x0a];

/** Strings that break the pattern: a character no atom accepts, or an atom repeated too few/many times. */
function violatingPattern(atoms: Atom[], regex: RegExp, maxLength: number): fc.Arbitrary<string>[] {
  const out: fc.Arbitrary<string>[] = [];
  const foreign = FOREIGN_CANDIDATES.filter((cp) => atoms.every((atom) => !inSet(atom.set, cp)));
  const valid = matchingPattern(atoms, 0, Math.min(maxLength, 40));
  if (foreign.length > 0) {
    out.push(
      fc.tuple(valid, fc.nat(), fc.constantFrom(...foreign)).map(([s, at, cp]) => {
        const cps = [...s];
        cps.splice(at % (cps.length + 1), 0, String.fromCodePoint(cp));
        return cps.join('');
      }),
    );
  }
  atoms.forEach((atom, k) => {
    const wrong = [atom.min - 1, Number.isFinite(atom.max) && atoms.length > 1 ? atom.max + 1 : -1].filter((n) => n >= 0);
    if (wrong.length === 0) return;
    out.push(
      fc.constantFrom(...wrong).chain((n) =>
        atomsString(
          atoms,
          atoms.map((a, j) => (j === k ? n : Math.min(a.min + 1, Number.isFinite(a.max) ? a.max : a.min + 1))),
        ),
      ),
    );
  });
  return out.map((arb) => arb.filter((s) => !regex.test(s)));
}

// ---------------------------------------------------------------------------------------------
// Formats.

const HEX = fc.constantFrom(...'0123456789abcdefABCDEF');
const hex = (n: number): fc.Arbitrary<string> => fc.array(HEX, { minLength: n, maxLength: n }).map((h) => h.join(''));

/** Any UUID-shaped value (every version and variant, either case), as Uuid's pattern allows. */
export const uuidArb: fc.Arbitrary<string> = fc.tuple(hex(8), hex(4), hex(4), hex(4), hex(12), fc.boolean()).map(([a, b, c, d, e, lower]) => {
  const id = `${a}-${b}-${c}-${d}-${e}`;
  return lower ? id.toLowerCase() : id;
});

const LOCAL_CHARS = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+/=?^_`{|}~-");
const LABEL_CHARS = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789');
const label = (max: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.array(LABEL_CHARS, { minLength: 1, maxLength: Math.min(max, 12) }).map((c) => c.join('')),
    fc.tuple(LABEL_CHARS, fc.array(fc.oneof(LABEL_CHARS, fc.constant('-')), { maxLength: max - 2 }), LABEL_CHARS).map(([a, mid, b]) => a + mid.join('') + b),
  );

/** An http(s) URL as format "uri" defines it: a scheme in any case, host labels, maybe a port, a path and a query. */
function uriArb(maxLength: number): fc.Arbitrary<string> {
  const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?$/);
  return fc
    .tuple(
      fc.constantFrom('https', 'http', 'HTTPS', 'hTTp'),
      fc.array(label, { minLength: 1, maxLength: 3 }),
      fc.constantFrom('com', 'com.br', 'example', 'io'),
      fc.option(fc.integer({ min: 1, max: 65_535 })),
      fc.array(fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/), { maxLength: 4 }),
      fc.option(fc.stringMatching(/^[A-Za-z0-9=&]{1,20}$/)),
    )
    .map(
      ([scheme, labels, tld, port, segments, query]) =>
        `${scheme}://${labels.join('.')}.${tld}${port ? `:${port}` : ''}/${segments.join('/')}${query ? `?${query}` : ''}`,
    )
    .filter((v) => v.length <= maxLength);
}

/** A mailbox `local@domain.tld` as format "email" defines it (dot-atoms, hostname labels). */
function emailArb(maxLength: number): fc.Arbitrary<string> {
  const atom = fc.array(LOCAL_CHARS, { minLength: 1, maxLength: 20 }).map((c) => c.join(''));
  const local = fc.array(atom, { minLength: 1, maxLength: 3 }).map((a) => a.join('.').slice(0, 64).replace(/\.+$/, ''));
  const domain = fc.array(label(63), { minLength: 2, maxLength: 4 }).map((l) => l.join('.'));
  return fc
    .tuple(local, domain)
    .map(([l, d]) => `${l}@${d}`)
    .filter((e) => e.length <= maxLength && !e.includes('.@'));
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeap = (y: number): boolean => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
const daysIn = (y: number, m: number): number => (m === 2 && isLeap(y) ? 29 : DAYS[m - 1]!);
const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/** Parts of an RFC 3339 date-time, kept so a test can compute the instant it names independently. */
interface DateTimeParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  /** Fraction digits as written ('' for none). */
  fraction: string;
  /** Offset in minutes east of UTC, or 'Z'/'z'. */
  offset: number | 'Z' | 'z';
  separator: 'T' | 't';
}

function formatDateTime(p: DateTimeParts): string {
  const frac = p.fraction ? `.${p.fraction}` : '';
  let tz: string;
  if (p.offset === 'Z' || p.offset === 'z') tz = p.offset;
  else {
    const abs = Math.abs(p.offset);
    tz = `${p.offset < 0 ? '-' : '+'}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  }
  return `${pad(p.year, 4)}-${pad(p.month)}-${pad(p.day)}${p.separator}${pad(p.hour)}:${pad(p.minute)}:${pad(p.second)}${frac}${tz}`;
}

const fraction = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 999 }).map((n) => pad(n, 3)) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 1, max: 9 }).chain((n) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: n, maxLength: n }).map((d) => d.join(''))),
  },
);

const ordinaryDateTime: fc.Arbitrary<DateTimeParts> = fc
  .record({
    year: fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: 1970, max: 2100 }) },
      { weight: 1, arbitrary: fc.constantFrom(0, 1, 1000, 9999) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 9999 }) },
    ),
    month: fc.integer({ min: 1, max: 12 }),
    day: fc.integer({ min: 1, max: 31 }),
    hour: fc.integer({ min: 0, max: 23 }),
    minute: fc.integer({ min: 0, max: 59 }),
    second: fc.integer({ min: 0, max: 59 }),
    fraction,
    offset: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom<'Z' | 'z'>('Z', 'Z', 'z') },
      { weight: 3, arbitrary: fc.integer({ min: -14 * 60, max: 14 * 60 }) },
      { weight: 1, arbitrary: fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }) },
    ),
    separator: fc.constantFrom<'T' | 't'>('T', 'T', 'T', 't'),
  })
  .map((p) => ({ ...p, day: Math.min(p.day, daysIn(p.year, p.month)) }));

/**
 * Any RFC 3339 date-time: T or t, Z, z or an offset of -23:59..+23:59, 0-9 fraction digits,
 * years 0000-9999, and now and then a leap second (23:59:60 UTC, which RFC 3339 allows).
 */
const dateTimePartsArb: fc.Arbitrary<DateTimeParts> = fc.oneof(
  { weight: 30, arbitrary: ordinaryDateTime },
  { weight: 1, arbitrary: ordinaryDateTime.map((p): DateTimeParts => ({ ...p, hour: 23, minute: 59, second: 60, offset: 'Z' })) },
);

const dateTimeArb = dateTimePartsArb.map(formatDateTime);

const BAD_DATE_TIMES = [
  '2026-11-20',
  '2026-11-20T14:32:05',
  '2026-13-01T00:00:00Z',
  '2026-00-10T00:00:00Z',
  '2026-02-29T00:00:00Z',
  '2026-04-31T00:00:00Z',
  '2026-11-20T24:00:00Z',
  '2026-11-20T14:60:00Z',
  '2026-11-20T12:00:60Z',
  '2026-11-20T14:32:05+24:00',
  '2026-11-20T14:32:05+05:60',
  '20261120T143205Z',
  '2026-11-20T14:32:05.Z',
  '2026/11/20T14:32:05Z',
  '26-11-20T14:32:05Z',
  'yesterday',
  'now',
  '1732113125',
];
const BAD_UUIDS = ['not-a-uuid', '123', '01935f4e8a2b7c3d9e4f5a6b7c8d9e0f', '{01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f}'];
const BAD_EMAILS = [
  'plainaddress',
  '@exemplo.com',
  'ana@',
  'ana@exemplo',
  'ana silva@exemplo.com',
  'ana@@exemplo.com',
  'ana@exemplo..com',
  '.ana@exemplo.com',
  'ana@-exemplo.com',
  'ana@exemplo.com.',
  'anã@exemplo.com',
  'ana@exemplo.com\u0000',
];

function badUuid(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom(...BAD_UUIDS),
    fc.tuple(uuidArb, fc.nat(), fc.constantFrom('drop', 'add', 'g', 'urn', 'space')).map(([id, at, how]) => {
      const k = at % id.length;
      if (how === 'drop') return id.slice(0, k) + id.slice(k + 1);
      if (how === 'add') return `${id.slice(0, k)}a${id.slice(k)}`;
      if (how === 'g') return `${id.slice(0, k)}g${id.slice(k + 1)}`;
      if (how === 'urn') return `urn:uuid:${id}`;
      return ` ${id}`;
    }),
  );
}

const badDateTime = fc.oneof(
  fc.constantFrom(...BAD_DATE_TIMES),
  dateTimeArb.map((s) => s.replace(/(Z|z|[+-]\d\d:\d\d)$/, '')),
  dateTimeArb.map((s) => s.replace(/[Tt]/, '_')),
);

// ---------------------------------------------------------------------------------------------
// The translator.

const JSON_TYPES = ['string', 'integer', 'number', 'boolean', 'null', 'array', 'object'] as const;

function sampleOfType(type: (typeof JSON_TYPES)[number]): fc.Arbitrary<unknown> {
  switch (type) {
    case 'string':
      return fc.constantFrom('5', 'true', '', 'null');
    case 'integer':
      return fc.integer({ min: -5, max: 20 });
    case 'number':
      return fc.constantFrom(0.5, -1.25, 0.0025);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.constantFrom([], ['a'], [1]);
    case 'object':
      return fc.constantFrom({}, { a: 1 });
  }
}

export interface Translator {
  /** The schema behind any chain of $ref (sibling keywords such as description kept). */
  resolve(schema: Schema): Schema;
  /** Values that satisfy the schema. */
  valid(schema: Schema): fc.Arbitrary<unknown>;
  /** Values of the schema serialised as a query-string value. */
  validQuery(schema: Schema): fc.Arbitrary<string>;
  /** Mutations of a valid value that make it break the schema (guarded by `isValid`). */
  mutations(schema: Schema, pointer?: string[]): fc.Arbitrary<Mutation>;
  /** Query-string values the schema rejects (after the query coercion OpenAPI applies). */
  invalidQuery(schema: Schema): fc.Arbitrary<string>;
  /** Whether a JSON value satisfies the schema, per Ajv with the contract's formats. */
  isValid(schema: Schema, value: unknown): boolean;
  /** Whether a query-string value satisfies the schema, with OpenAPI's type coercion. */
  isValidQuery(schema: Schema, value: string): boolean;
}

export function applyMutation(value: unknown, mutation: Mutation): unknown {
  if (mutation.pointer.length === 0) return mutation.op === 'set' ? mutation.value : undefined;
  const copy = structuredClone(value) as Record<string, unknown>;
  let target: Record<string, unknown> = copy;
  for (const key of mutation.pointer.slice(0, -1)) {
    if (typeof target[key] !== 'object' || target[key] === null) target[key] = {};
    target = target[key] as Record<string, unknown>;
  }
  const last = mutation.pointer[mutation.pointer.length - 1]!;
  if (mutation.op === 'delete') delete target[last];
  else target[last] = mutation.value;
  return copy;
}

/** A translator over a parsed OpenAPI document (for `$ref` resolution and Ajv validation). */
export function translator(spec: Schema): Translator {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  const ajvQuery = new Ajv2020({ strict: false, allErrors: false, coerceTypes: true });
  for (const instance of [ajv, ajvQuery]) {
    (addFormats as unknown as (a: Ajv2020, o: { mode: string }) => void)(instance, { mode: 'full' });
    instance.addSchema(spec, 'openapi');
  }
  const compiled = new Map<string, ValidateFunction>();
  const compile = (instance: Ajv2020, schema: Schema, key: string): ValidateFunction => {
    const text = JSON.stringify(schema).replaceAll('"#/', '"openapi#/');
    let fn = compiled.get(key + text);
    if (!fn) {
      fn = instance.compile(JSON.parse(text) as Schema);
      compiled.set(key + text, fn);
    }
    return fn;
  };

  function resolve(schema: Schema): Schema {
    let current = schema;
    const siblings: Schema = {};
    while (current.$ref) {
      const { $ref, ...rest } = current;
      Object.assign(siblings, rest);
      current = ($ref as string)
        .replace(/^#\//, '')
        .split('/')
        .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce((node: Schema, key) => node[key], spec);
    }
    return { ...current, ...siblings };
  }

  const types = (s: Schema): string[] => (Array.isArray(s.type) ? s.type : s.type ? [s.type] : ['object']);

  function validString(s: Schema): fc.Arbitrary<string> {
    const min = s.minLength ?? 0;
    const max = s.maxLength ?? Math.max(min, 64);
    const formatted =
      s.format === 'uuid'
        ? uuidArb
        : s.format === 'email'
          ? emailArb(max)
          : s.format === 'date-time'
            ? dateTimeArb
            : s.format === 'uri'
              ? uriArb(max)
              : undefined;
    if (formatted) {
      // A pattern beside a format narrows it (e.g. Uuid); values the pattern refuses are left out.
      const regex = s.pattern ? new RegExp(s.pattern, 'u') : undefined;
      return regex ? formatted.filter((v) => regex.test(v)) : formatted;
    }
    if (s.pattern) {
      const atoms = parsePattern(s.pattern);
      // Several atoms may together pass the schema's length bounds: those are left out.
      if (atoms) return matchingPattern(atoms, min, max).filter((v) => cpLength(v) >= min && cpLength(v) <= max);
      const regex = new RegExp(s.pattern, 'u');
      return fc.stringMatching(regex).filter((v) => cpLength(v) >= min && cpLength(v) <= max);
    }
    return stringOf(codePoint, min, max);
  }

  function valid(schema: Schema): fc.Arbitrary<unknown> {
    const s = resolve(schema);
    // A oneOf of whole schemas: each branch's values, kept when exactly one branch accepts them.
    if (s.oneOf && !s.properties) return fc.oneof(...(s.oneOf as Schema[]).map((branch) => valid(branch))).filter((v) => isValid(s, v));
    if (s.const !== undefined) return fc.constant(s.const);
    if (s.enum) return fc.constantFrom(...(s.enum as unknown[]));
    return fc.oneof(
      ...types(s).map((type): fc.Arbitrary<unknown> => {
        switch (type) {
          case 'string':
            return validString(s);
          case 'integer':
            return fc.integer({ min: s.minimum ?? -1_000_000, max: s.maximum ?? 1_000_000 });
          case 'number':
            return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true });
          case 'boolean':
            return fc.boolean();
          case 'null':
            return fc.constant(null);
          case 'array':
            return s.uniqueItems
              ? fc.uniqueArray(valid(s.items ?? {}), { minLength: s.minItems ?? 0, maxLength: s.maxItems ?? 5, selector: (v) => JSON.stringify(v) })
              : fc.array(valid(s.items ?? {}), { minLength: s.minItems ?? 0, maxLength: s.maxItems ?? 5 });
          default: {
            const properties = (s.properties ?? {}) as Record<string, Schema>;
            const model = Object.fromEntries(Object.entries(properties).map(([k, p]) => [k, valid(p)]));
            const record = fc.record(model, { requiredKeys: (s.required ?? []) as never[] }) as fc.Arbitrary<Record<string, unknown>>;
            const minProperties = (s.minProperties ?? 0) as number;
            const sized = minProperties > 0 ? record.filter((o) => Object.keys(o).length >= minProperties) : record;
            // Rules across properties (a oneOf of `required` lists, say): the values that keep them.
            return s.oneOf || s.not ? sized.filter((o) => isValid(s, o)) : sized;
          }
        }
      }),
    );
  }

  function validQuery(schema: Schema): fc.Arbitrary<string> {
    return valid(schema).map((v) => String(v));
  }

  function wrongType(s: Schema): fc.Arbitrary<unknown> {
    const allowed = types(s);
    const others = JSON_TYPES.filter((t) => !allowed.includes(t) && !(t === 'integer' && allowed.includes('number')));
    return fc
      .constantFrom(...others)
      .chain(sampleOfType)
      .filter((v) => !(allowed.includes('number') && typeof v === 'number'));
  }

  /** Invalid values of a string schema, each with what it breaks. */
  function invalidStrings(s: Schema): Array<fc.Arbitrary<{ value: string; what: string }>> {
    const out: Array<fc.Arbitrary<{ value: string; what: string }>> = [];
    const tag = (what: string) => (value: string) => ({ value, what });
    const atoms = s.pattern ? parsePattern(s.pattern) : undefined;
    const chars = atoms?.length === 1 ? charOf(atoms[0]!.set) : codePoint;
    if (s.maxLength !== undefined)
      out.push(
        fc
          .integer({ min: s.maxLength + 1, max: s.maxLength + 3 })
          .chain((n) => fromCodePoints(chars, n))
          .map(tag('too long')),
      );
    if ((s.minLength ?? 0) > 0)
      out.push(
        fc
          .integer({ min: 0, max: s.minLength - 1 })
          .chain((n) => fromCodePoints(chars, n))
          .map(tag('too short')),
      );
    if (s.pattern) {
      const regex = new RegExp(s.pattern, 'u');
      const violations = atoms ? violatingPattern(atoms, regex, s.maxLength ?? 64) : [fc.string().filter((v) => !regex.test(v))];
      out.push(...violations.map((arb) => arb.map(tag(`does not match ${s.pattern}`))));
    }
    if (s.enum) {
      const members = s.enum as string[];
      out.push(
        fc
          .oneof(
            fc.constantFrom(...members).map((m) => m.toUpperCase()),
            fc.constantFrom(...members).map((m) => `${m} `),
            fc.constantFrom('', 'unknown', 'null'),
          )
          .filter((v) => !members.includes(v))
          .map(tag('not in enum')),
      );
    }
    if (s.format === 'uuid') out.push(badUuid().map(tag('malformed uuid')));
    if (s.format === 'email') out.push(fc.constantFrom(...BAD_EMAILS).map(tag('malformed email')));
    if (s.format === 'date-time') out.push(badDateTime.map(tag('malformed date-time')));
    return out;
  }

  function invalidNumbers(s: Schema): Array<fc.Arbitrary<{ value: number; what: string }>> {
    const out: Array<fc.Arbitrary<{ value: number; what: string }>> = [];
    if (s.minimum !== undefined)
      out.push(
        fc.oneof(fc.constant(s.minimum - 1), fc.integer({ min: -2_000_000_000, max: s.minimum - 1 })).map((value) => ({ value, what: 'below minimum' })),
      );
    if (s.maximum !== undefined)
      out.push(
        fc
          .oneof(fc.constant(s.maximum + 1), fc.integer({ min: s.maximum + 1, max: 2_000_000_000 }), fc.constant(2 ** 53 + 2))
          .map((value) => ({ value, what: 'above maximum' })),
      );
    if (types(s).includes('integer')) out.push(fc.constantFrom(0.5, 1.5, 9.99).map((value) => ({ value: (s.minimum ?? 0) + value, what: 'not an integer' })));
    return out;
  }

  /** What the service accepts: the schema's rules, and text that is well-formed Unicode. */
  function isValid(schema: Schema, value: unknown): boolean {
    return wellFormed(value) && compile(ajv, schema, 'json:')(value);
  }

  /** A query array (style form, explode false: `a,b`) is its comma-separated items. */
  function isValidQuery(schema: Schema, value: string): boolean {
    if (value === '') return false;
    const v = types(resolve(schema)).includes('array') ? value.split(',') : value;
    return compile(ajvQuery, { type: 'object', properties: { v: schema } }, 'query:')({ v });
  }

  function mutations(schema: Schema, pointer: string[] = []): fc.Arbitrary<Mutation> {
    const s = resolve(schema);
    if (s.oneOf && !s.properties) {
      // A rule of one branch broken (the case is kept only if no branch accepts the result), or the
      // parts of two branches at once.
      const branches = (s.oneOf as Schema[]).map((branch) => resolve(branch));
      const options = branches.map((branch) => mutations(branch, pointer));
      const keys = [...new Set(branches.flatMap((b) => Object.keys(b.properties ?? {})))];
      // Only objects have fields to mix: beside a `null` branch (an object or null), there is no other branch's field.
      if (keys.length > 0 && branches.every((b) => b.properties)) {
        options.push(
          fc.constantFrom(...keys).chain((key) => {
            const owner = branches.find((b) => key in (b.properties ?? {}))!;
            return valid(owner.properties[key]).map((value): Mutation => ({
              op: 'set',
              pointer: [...pointer, key],
              value,
              what: `${key}: set beside another branch's fields`,
              mixed: true,
            }));
          }),
        );
      }
      return fc.oneof(...options);
    }
    const at =
      (what: string) =>
      (value: unknown): Mutation => ({ op: 'set', pointer, value, what: `${pointer.join('.') || 'value'}: ${what}` });
    const options: fc.Arbitrary<Mutation>[] = [wrongType(s).map(at('wrong type'))];
    const type = types(s);
    if (type.includes('string') || s.enum) options.push(...invalidStrings(s).map((arb) => arb.map(({ value, what }) => at(what)(value))));
    if (type.includes('string') && !s.enum) options.push(withLoneSurrogate(validString(s)).map(at('lone surrogate')));
    if (type.includes('integer') || type.includes('number')) options.push(...invalidNumbers(s).map((arb) => arb.map(({ value, what }) => at(what)(value))));
    if (type.includes('object') && s.properties) {
      const properties = s.properties as Record<string, Schema>;
      for (const key of (s.required ?? []) as string[]) {
        options.push(fc.constant<Mutation>({ op: 'delete', pointer: [...pointer, key], what: `${key}: required, left out` }));
      }
      if (s.additionalProperties === false) {
        const unknownKey = fc
          .oneof(fc.constantFrom('id', 'workspaceId', 'createdAt', '__proto__x', 'Name', 'extra'), fc.string({ minLength: 1, maxLength: 8 }))
          .filter((k) => !(k in properties));
        options.push(
          fc
            .tuple(unknownKey, fc.jsonValue({ maxDepth: 1 }))
            .map(([key, value]): Mutation => ({ op: 'set', pointer: [...pointer, key], value, what: `${key}: unknown property` })),
        );
      }
      if ((s.minProperties ?? 0) > 0) options.push(fc.constant<Mutation>({ op: 'set', pointer, value: {}, what: 'fewer properties than minProperties' }));
      for (const [key, property] of Object.entries(properties)) options.push(mutations(property, [...pointer, key]));
    }
    return fc.oneof(...options);
  }

  function invalidQuery(schema: Schema): fc.Arbitrary<string> {
    const s = resolve(schema);
    const options: fc.Arbitrary<string>[] = [fc.constant('')];
    if (types(s).includes('integer') || types(s).includes('number')) {
      options.push(fc.constantFrom('abc', '1.5', '1,2', 'NaN', 'Infinity', 'true', '[1]'));
      options.push(...invalidNumbers(s).map((arb) => arb.map(({ value }) => String(value))));
    }
    if (types(s).includes('string')) options.push(...invalidStrings(s).map((arb) => arb.map(({ value }) => value)));
    if (types(s).includes('array')) {
      // A valid list with one bad item among its items, or an empty item.
      const item = resolve(s.items as Schema);
      const bad = fc.oneof(...invalidStrings(item).map((arb) => arb.map(({ value }) => value)));
      options.push(fc.tuple(validQuery(s), bad).map(([list, value]) => `${list},${value}`));
    }
    return fc.oneof(...options).filter((v) => !isValidQuery(s, v));
  }

  return { resolve, valid, validQuery, mutations, invalidQuery, isValid, isValidQuery };
}
