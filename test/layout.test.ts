// The rooms of src/ keep to the layout of docs/ARCHITECTURE.md: db/ reads and writes its tables and imports no
// capability and no migration; each event type has exactly one emitter, in the service layer. Read
// from the real source files with simple regular expressions.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NO_AGENT } from '../src/db/schema.js';
import { NO_AGENT as MIGRATION_NO_AGENT } from '../src/db/migrations/0004_funnel_and_crm.js';
import { loadSpec } from '../src/contract.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/** Every TypeScript module under `dir` (relative to the repository), recursively. */
function modules(dir: string): string[] {
  return fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f))
    .sort();
}

const read = (file: string): string => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The repository paths a module imports relatively (value and type imports alike, `import('...')` types too). */
function importsOf(file: string): string[] {
  const text = read(file);
  const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gm)].map((m) => m[1]!);
  return specifiers.map((s) => path.join(path.dirname(file), s).replace(/\.js$/, '.ts'));
}

/** The rooms of capabilities and of HTTP, which the data layer serves and never calls. */
const ROOMS = [
  'src/ai/',
  'src/automations/',
  'src/channels/',
  'src/events/',
  'src/jobs/',
  'src/media/',
  'src/middleware/',
  'src/outbound/',
  'src/routes/',
  'src/services/',
];

describe('the data layer', () => {
  it('when every module of src/db is read, then none imports a capability, a route, a service or a migration (migrate.ts runs them)', () => {
    const data = modules('src/db').filter((f) => !f.startsWith('src/db/migrations/'));
    const offending = data.flatMap((file) =>
      importsOf(file)
        .filter((target) => ROOMS.some((room) => target.startsWith(room)) || (target.startsWith('src/db/migrations/') && file !== 'src/db/migrate.ts'))
        .map((target) => `${file} -> ${target}`),
    );

    expect(data.length).toBeGreaterThan(10);
    expect(offending).toEqual([]);
  });

  it('when a migration is read, then it imports nothing of the application (it is frozen in time)', () => {
    const migrations = modules('src/db/migrations');
    const offending = migrations.flatMap((file) => importsOf(file).map((target) => `${file} -> ${target}`));

    expect(migrations.length).toBeGreaterThan(10);
    expect(offending).toEqual([]);
  });

  it('when the agent key of unassigned NPS answers is read, then the code’s constant is the value migration 0004 stored', () => {
    expect(NO_AGENT).toBe(MIGRATION_NO_AGENT);
  });
});

describe('events', () => {
  /** Each call of recordEvent or recordChangeEvent in src/ with the event type literal it passes. */
  function emissions(): Array<{ file: string; type: string }> {
    return modules('src')
      .filter((file) => file !== 'src/events/record.ts')
      .flatMap((file) =>
        [...read(file).matchAll(/\brecord(?:Change)?Event\(\s*[^,]+,\s*[^,]+,\s*(?:'([^']*)'|([^,)]+))/g)].map((m) => ({
          file,
          type: m[1] ?? `(not a literal: ${m[2]!.trim()})`,
        })),
      );
  }

  const eventTypes = (): string[] => {
    const spec = loadSpec() as { components: { schemas: { EventType: { enum: string[] } } } };
    return spec.components.schemas.EventType.enum;
  };

  it('when src/ is read, then each event type of the contract is emitted by exactly one call, with its type written out', () => {
    const found = emissions();
    const callsPerType = Object.fromEntries(eventTypes().map((type) => [type, found.filter((e) => e.type === type).map((e) => e.file)]));

    expect(eventTypes().length).toBeGreaterThanOrEqual(6);
    expect(found.map((e) => e.type).filter((type) => !eventTypes().includes(type))).toEqual([]);
    for (const [type, files] of Object.entries(callsPerType)) expect({ type, files }).toEqual({ type, files: [expect.any(String)] });
  });

  it('when src/ is read, then every event is emitted in the service layer, never from a route or the data layer', () => {
    const outside = emissions().filter((e) => !e.file.startsWith('src/services/'));

    expect(outside).toEqual([]);
  });
});

describe('contract types', () => {
  /** Every enum of strings in openapi.yaml (schemas, properties, parameters), as its sorted values. */
  function contractEnums(): Map<string, string> {
    const found = new Map<string, string>();
    const walk = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${where}[${i}]`));
      if (!node || typeof node !== 'object') return;
      const object = node as Record<string, unknown>;
      if (Array.isArray(object.enum) && object.enum.length > 1 && object.enum.every((v) => typeof v === 'string')) {
        found.set([...object.enum].sort().join(' | '), where);
      }
      for (const [key, value] of Object.entries(object)) walk(value, `${where}.${key}`);
    };
    walk(loadSpec(), '');
    return found;
  }

  it('when src/ is read, then no union of string literals copies an enum of the contract: such types come from generated/api.ts', () => {
    const enums = contractEnums();
    const copies = modules('src')
      .filter((file) => !file.startsWith('src/db/migrations/'))
      .flatMap((file) =>
        [...read(file).matchAll(/'[^'\n]*'(?:\s*\|\s*'[^'\n]*')+/g)]
          .map((m) =>
            [...m[0].matchAll(/'([^'\n]*)'/g)]
              .map((v) => v[1]!)
              .sort()
              .join(' | '),
          )
          .filter((values) => enums.has(values))
          .map((values) => `${file}: ${values} (the contract's ${enums.get(values)})`),
      );

    expect(enums.size).toBeGreaterThan(20);
    expect(copies).toEqual([]);
  });
});
