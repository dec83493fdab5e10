// A strict reader of Prometheus' text exposition format (version 0.0.4, what prom-client writes and
// Prometheus scrapes): it throws on any line the format does not allow, instead of guessing. The
// parser on npm (parse-prometheus-text-format 1.1.1) takes `a{b="c} 1` or `a b` as samples with
// values "" and "b": it cannot tell a broken exposition from a good one, which is what a test needs.
// Checked as Prometheus checks a scrape: names and label names, quoted and escaped label values,
// float values, a family's TYPE before its samples and once, samples of a family together, no
// series twice, histograms' buckets cumulative with +Inf equal to _count.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The sample's own name (e.g. x_bucket for histogram x). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | undefined;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
// Go's strconv.ParseFloat, which Prometheus reads values with: NaN and Inf in any case (prom-client writes Nan).
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)$/i;

export class ExpositionError extends Error {}

function parseValue(text: string, line: number): number {
  if (!FLOAT.test(text)) throw new ExpositionError(`line ${line}: "${text}" is not a float`);
  if (/inf/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/nan/i.test(text)) return NaN;
  return Number(text);
}

/** Reads `{a="x",b="y"}` from `text` at `at` (just past the `{`); returns the labels and the index past `}`. */
function parseLabels(text: string, at: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = at;
  for (;;) {
    if (text[i] === '}') return { labels, end: i + 1 };
    const eq = text.indexOf('=', i);
    if (eq === -1) throw new ExpositionError(`line ${line}: a label without =`);
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new ExpositionError(`line ${line}: bad label name "${name}"`);
    if (name in labels) throw new ExpositionError(`line ${line}: label ${name} twice`);
    if (text[eq + 1] !== '"') throw new ExpositionError(`line ${line}: label ${name}'s value is not quoted`);
    let value = '';
    let j = eq + 2;
    for (;;) {
      const c = text[j];
      if (c === undefined) throw new ExpositionError(`line ${line}: label ${name}'s value is not closed`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[j + 1];
        if (next === '\\' || next === '"') value += next;
        else if (next === 'n') value += '\n';
        else throw new ExpositionError(`line ${line}: bad escape \\${next ?? ''} in label ${name}`);
        j += 2;
      } else {
        value += c;
        j += 1;
      }
    }
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i += 1;
    else if (text[i] !== '}') throw new ExpositionError(`line ${line}: expected , or } after label ${name}`);
  }
}

/** The family a sample named `name` belongs to, given the family being read. */
function belongsTo(family: Family, name: string): boolean {
  if (family.type === 'histogram') return [`${family.name}_bucket`, `${family.name}_sum`, `${family.name}_count`].includes(name);
  if (family.type === 'summary') return [family.name, `${family.name}_sum`, `${family.name}_count`].includes(name);
  return name === family.name;
}

function checkHistogram(family: Family): void {
  const series = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (sample.name.endsWith('_bucket')) {
      if (le === undefined) throw new ExpositionError(`${family.name}: a bucket without le`);
      entry.buckets.push([parseValue(le, 0), sample.value]);
    } else if (sample.name.endsWith('_count')) entry.count = sample.value;
  }
  for (const [key, { buckets, count }] of series) {
    const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
    if (sorted.at(-1)?.[0] !== Infinity) throw new ExpositionError(`${family.name}${key}: no +Inf bucket`);
    sorted.forEach(([, value], i) => {
      if (i > 0 && value < sorted[i - 1]![1]) throw new ExpositionError(`${family.name}${key}: buckets are not cumulative`);
    });
    if (count !== sorted.at(-1)![1]) throw new ExpositionError(`${family.name}${key}: _count ${count} is not the +Inf bucket ${sorted.at(-1)![1]}`);
  }
}

/** Parses a whole exposition into its families by name; throws ExpositionError at the first fault. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  let current: Family | undefined;
  const family = (name: string): Family => {
    let found = families.get(name);
    if (!found) {
      found = { name, type: 'untyped', help: undefined, samples: [] };
      families.set(name, found);
    }
    return found;
  };
  if (text !== '' && !text.endsWith('\n')) throw new ExpositionError('the exposition does not end with a newline');
  text
    .split('\n')
    .slice(0, -1)
    .forEach((raw, index) => {
      const line = index + 1;
      if (raw.trim() === '') return;
      if (raw.startsWith('#')) {
        const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(raw);
        if (!meta) return; // Any other comment is allowed.
        const [, kind, name, rest = ''] = meta;
        if (!METRIC_NAME.test(name!)) throw new ExpositionError(`line ${line}: bad metric name "${name}"`);
        const f = family(name!);
        if (f.samples.length > 0) throw new ExpositionError(`line ${line}: ${kind} for ${name} after its samples`);
        if (kind === 'TYPE') {
          if (!TYPES.has(rest as MetricType)) throw new ExpositionError(`line ${line}: unknown type "${rest}"`);
          if (seen.has(`type:${name}`)) throw new ExpositionError(`line ${line}: TYPE for ${name} twice`);
          seen.add(`type:${name}`);
          f.type = rest as MetricType;
        } else {
          if (f.help !== undefined) throw new ExpositionError(`line ${line}: HELP for ${name} twice`);
          f.help = rest.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
        }
        current = f;
        return;
      }
      const nameEnd = raw.search(/[{ ]/);
      if (nameEnd <= 0) throw new ExpositionError(`line ${line}: not a sample: ${raw}`);
      const name = raw.slice(0, nameEnd);
      if (!METRIC_NAME.test(name)) throw new ExpositionError(`line ${line}: bad metric name "${name}"`);
      let labels: Record<string, string> = {};
      let rest = raw.slice(nameEnd);
      if (rest.startsWith('{')) {
        const parsed = parseLabels(raw, nameEnd + 1, line);
        labels = parsed.labels;
        rest = raw.slice(parsed.end);
      }
      const parts = /^ (\S+)(?: (-?\d+))?$/.exec(rest);
      if (!parts) throw new ExpositionError(`line ${line}: expected " value [timestamp]" after the labels: ${raw}`);
      const owner = current && belongsTo(current, name) ? current : family(name);
      if (owner !== current && owner.samples.length > 0) throw new ExpositionError(`line ${line}: samples of ${owner.name} are not together`);
      current = owner;
      const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
      if (seen.has(series)) throw new ExpositionError(`line ${line}: series ${series} twice`);
      seen.add(series);
      owner.samples.push({ name, labels, value: parseValue(parts[1]!, line) });
    });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

/** The value of the sample named `name` with exactly `labels` (0 when absent: a counter not yet moved). */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  for (const f of families.values()) {
    const found = f.samples.find(
      (s) => s.name === name && Object.keys(s.labels).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    );
    if (found) return found.value;
  }
  return 0;
}
