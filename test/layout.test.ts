// The rooms of src/ keep to the layout of the README and docs/ARCHITECTURE.md: the boundaries of eslint.config.js
// refuse each import across a room's wall (probes linted with ESLint's API); the queue (jobs/) imports no
// capability and only it names its table; the event log (events/) imports none of its consumers; the Meta
// adapter (channels/) stores no contact, thread or message itself (services/ does); each table is named in SQL
// by its owner or a named reader; each event type has exactly one emitter, in the service layer; no union of
// literals copies a contract enum. Read from the real source files.
import fs from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
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

/** ESLint as `npm run lint` runs it, with the boundary rules only and no type information (a probe is a file of its own, not on disk). */
const boundaryLint = new ESLint({
  cwd: ROOT,
  overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
  ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports' || ruleId === 'no-restricted-syntax',
});

/** What lint says of `code` written at `file` (relative to the repository): each finding's rule and message. */
async function lintAt(file: string, code: string): Promise<Array<{ rule: string | null; message: string }>> {
  const [result] = await boundaryLint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.map((m) => ({ rule: m.ruleId, message: m.message }));
}

describe('room boundaries (eslint.config.js, so `npm run lint` and editors show them)', () => {
  const refused = [
    {
      file: 'src/db/boundary-probe.ts',
      imports: ['../services/threads.js', '../channels/graph.js', '../jobs/queue.js', '../stream/hub.js', './migrations/0001_initial.js'],
    },
    { file: 'src/db/migrations/9999_boundary_probe.ts', imports: ['../schema.js', '../../time.js', './0001_initial.js'] },
    {
      file: 'src/jobs/boundary-probe.ts',
      imports: ['../ai/replies.js', '../automations/engine.js', '../channels/graph.js', '../events/record.js', '../media/store.js', '../services/messages.js'],
    },
    { file: 'src/jobs/boundary-probe.ts', imports: ['../routes/index.js', '../stream/hub.js', '../outbound/http.js'] },
    { file: 'src/events/boundary-probe.ts', imports: ['../automations/triggers.js', '../ai/replies.js', '../channels/settings.js'] },
    { file: 'src/channels/boundary-probe.ts', imports: ['../ai/replies.js', '../automations/engine.js'] },
    {
      file: 'src/services/boundary-probe.ts',
      imports: [
        '../channels/webhook.js',
        '../routes/index.js',
        '../middleware/authenticate.js',
        '../ai/replies.js',
        '../automations/engine.js',
        '../stream/hub.js',
      ],
    },
    { file: 'src/config.ts', imports: ['./channels/graph.js', './db/schema.js', './outbound/ssrf.js'] },
    { file: 'src/media/boundary-probe.ts', imports: ['../channels/secrets.js'] },
    { file: 'src/boundary-probe.ts', imports: ['./channels/secrets.js'] },
    { file: 'test/boundary-probe.test.ts', imports: ['../src/channels/secrets.js'] },
  ];

  it.each(refused)('when $file imports $imports, then lint refuses each import, type imports too, with the boundary’s reason', async ({ file, imports }) => {
    const code = imports.map((target, i) => (i % 2 ? `import type { T${i} } from '${target}';` : `import { v${i} } from '${target}';`)).join('\n');

    const findings = await lintAt(file, `${code}\n`);

    expect(findings).toHaveLength(imports.length);
    for (const [i, target] of imports.entries()) {
      expect(findings[i]).toEqual({ rule: 'no-restricted-imports', message: expect.stringContaining(`'${target}' import is restricted`) });
    }
  });

  it('when a module of src/ imports a relative module with import() (a value or a type), then lint refuses it: the boundaries see static imports only', async () => {
    const findings = await lintAt(
      'src/db/boundary-probe.ts',
      "export const load = () => import('../services/threads.js');\nexport type T = import('../services/threads.js').ThreadState;\n",
    );

    expect(findings.map((f) => f.rule)).toEqual(['no-restricted-syntax', 'no-restricted-syntax']);
  });

  it.each([
    { file: 'src/jobs/boundary-probe.ts', imports: ['../db/database.js', '../logger.js', './queue.js', '../config.js'] },
    { file: 'src/events/boundary-probe.ts', imports: ['../jobs/queue.js', '../outbound/http.js', '../db/schema.js', '../secrets.js'] },
    { file: 'src/channels/boundary-probe.ts', imports: ['../services/messages.js', '../media/store.js', '../secrets.js', './graph.js'] },
    {
      file: 'src/services/boundary-probe.ts',
      imports: ['../db/messages.js', '../events/record.js', '../jobs/queue.js', '../media/inbound.js', '../sla/clocks.js', './channel-rules.js'],
    },
    { file: 'src/db/boundary-probe.ts', imports: ['./schema.js', '../actor.js', '../../generated/api.js'] },
    { file: 'src/db/migrate.ts', imports: ['./migrations/0001_initial.js', './database.js'] },
    { file: 'src/db/migrations/9999_boundary_probe.ts', imports: ['kysely'] },
    { file: 'src/config.ts', imports: ['./secrets.js', 'node:path'] },
  ])('when $file imports what its room may ($imports), then lint says nothing', async ({ file, imports }) => {
    const code = imports.map((target, i) => `import { v${i} } from '${target}';`).join('\n');

    expect(await lintAt(file, `${code}\n`)).toEqual([]);
  });
});

describe('the data layer', () => {
  it('when the agent key of unassigned NPS answers is read, then the code’s constant is the value migration 0004 stored', () => {
    expect(NO_AGENT).toBe(MIGRATION_NO_AGENT);
  });
});

/** The repository paths a module imports relatively (value and type imports alike, `import('...')` types too). */
function importsOf(file: string): string[] {
  const text = read(file);
  const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gm)].map((m) => m[1]!);
  return specifiers.map((s) => path.join(path.dirname(file), s).replace(/\.js$/, '.ts'));
}

/** `file -> target` for each import of a module of `dir` that lands in one of `rooms`. */
function importsInto(dir: string, rooms: string[]): string[] {
  return modules(dir).flatMap((file) =>
    importsOf(file)
      .filter((target) => rooms.some((room) => target.startsWith(room)))
      .map((target) => `${file} -> ${target}`),
  );
}

describe('the rooms', () => {
  it('when every module of src/jobs is read, then none imports a capability, a route or the stream: the queue is only a queue (src/workers.ts wires the kinds)', () => {
    const rooms = ['src/ai/', 'src/automations/', 'src/channels/', 'src/events/', 'src/media/', 'src/services/', 'src/routes/', 'src/stream/', 'src/outbound/'];

    expect(modules('src/jobs').length).toBeGreaterThan(4);
    expect(importsInto('src/jobs', rooms)).toEqual([]);
  });

  it('when src/ is read, then no module outside src/jobs (and the frozen migrations) names the jobs table: other rooms name jobs by kind and JobKey', () => {
    const naming = /\b(?:from|into|update|join|table)\s+jobs\b|\b(?:selectFrom|insertInto|updateTable|deleteFrom)\(\s*'jobs\b/i;
    const offending = modules('src').filter((file) => !file.startsWith('src/jobs/') && !file.startsWith('src/db/migrations/') && naming.test(read(file)));

    expect(naming.test('delete from jobs where true')).toBe(true);
    expect(offending).toEqual([]);
  });

  it('when every module of src/events is read, then none imports automations, ai or channels: consumers are registered (src/event-consumers.ts)', () => {
    expect(importsInto('src/events', ['src/automations/', 'src/ai/', 'src/channels/'])).toEqual([]);
  });

  it('when every module of src/channels is read, then none imports ai or automations', () => {
    expect(importsInto('src/channels', ['src/ai/', 'src/automations/'])).toEqual([]);
  });

  it('when every module of src/services is read, then none imports an adapter (channels, routes, middleware), ai, automations or the stream: the adapters call the use cases, one way', () => {
    const rooms = ['src/channels/', 'src/routes/', 'src/middleware/', 'src/ai/', 'src/automations/', 'src/stream/'];

    expect(modules('src/services').length).toBeGreaterThan(4);
    expect(importsInto('src/services', rooms)).toEqual([]);
  });

  it('when every module of src/channels is read, then none creates a contact, opens a thread or stores a message: services/receive.ts does', () => {
    const storing =
      /\b(?:findOrCreateContact|createContact|insertContact\w*|openThread\w*|insertInboundMessage|insertMessage|appendTo\w*Thread|messageCreated|recordInbound|recordEvent|recordChangeEvent)\s*\(/;
    const offending = modules('src/channels').filter((file) => storing.test(read(file)));

    expect(modules('src/channels').length).toBeGreaterThan(4);
    expect(offending).toEqual([]);
  });
});

describe('where SQL lives', () => {
  /** The tables of the Database interface (src/db/schema.ts). */
  const tables = (): string[] => {
    const schema = read('src/db/schema.ts');
    return [
      ...schema
        .slice(schema.indexOf('export interface Database {'))
        .split('}')[0]!
        .matchAll(/^\s+([a-z_]+): /gm),
    ].map((m) => m[1]!);
  };

  /** The room that owns a table: the queue's, the event log's, the stream's and the service levels' own tables are theirs, the API's resources are src/db/'s. */
  const ownerOf = (table: string): string =>
    table === 'jobs'
      ? 'src/jobs/'
      : ['events', 'webhook_endpoints', 'webhook_deliveries'].includes(table)
        ? 'src/events/'
        : table.startsWith('stream_')
          ? 'src/stream/'
          : table.startsWith('sla_')
            ? 'src/sla/'
            : 'src/db/';

  /**
   * Reads of another room's table inside a statement of the reader's, where one round trip is the
   * point: an event's consumers add their WITH queries to the statement recording the event.
   */
  const READS: Record<string, string[]> = {
    'src/db/automation-runs.ts': ['events'], // startEventRun: the event's object, in the run's one statement
    'src/db/sealed-keys.ts': ['webhook_endpoints'], // the key ids of every sealed value, in one query at start
    'src/stream/log.ts': ['events'], // the live stream reads the log in commit order; it writes nothing
    'src/stream/tokens.ts': ['api_keys'], // a token stands for its key only while the key is not revoked
    // The event log's consumers (events/fan-out.ts): which automations an event runs and which idle
    // timers it moves, and whether its thread's AI agent answers, decided in the event's statement.
    'src/automations/triggers.ts': ['automations', 'automation_runs', 'threads', 'messages'],
    'src/ai/replies.ts': ['threads', 'agents'],
    // A thread's clocks move under the thread's row lock, in the statement of the change that moves them.
    'src/sla/clocks.ts': ['threads'],
    'src/sla/timers.ts': ['threads'],
  };

  it('when src/ is read, then each table is named in SQL only by the room that owns it, or by a named reader', () => {
    const all = tables();
    const found = modules('src')
      .filter((file) => !file.startsWith('src/db/migrations/'))
      .flatMap((file) => {
        const code = read(file)
          .replace(/\/\*[\s\S]*?\*\//g, '')
          .replace(/^\s*\/\/.*$/gm, '');
        return all
          .filter((table) => !file.startsWith(ownerOf(table)))
          .filter((table) =>
            new RegExp(
              `\\b(?:from|join|into|update)\\s+(?:public\\.)?${table}\\b(?!\\.)|(?:selectFrom|insertInto|updateTable|deleteFrom|innerJoin|leftJoin)\\(\\s*'${table}\\b`,
            ).test(code),
          )
          .map((table) => `${file}: ${table}`);
      });
    const named = Object.entries(READS).flatMap(([file, names]) => names.map((table) => `${file}: ${table}`));

    expect(all.length).toBeGreaterThan(20);
    expect(found.filter((hit) => !named.includes(hit))).toEqual([]);
    // A named reader that no longer reads leaves the list.
    expect(named.filter((hit) => !found.includes(hit))).toEqual([]);
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

  it('when src/ is read, then events are inserted in one place, the statement of events/record.ts whose fan-out runs every registered consumer (the live stream’s wake-up too: no trigger on events)', () => {
    const inserting = /\binsert\s+into\s+(?:public\.)?events\b|\binsertInto\(\s*'events'/gi;
    const inserts = modules('src')
      .filter((file) => !file.startsWith('src/db/migrations/'))
      .flatMap((file) => [...read(file).matchAll(inserting)].map(() => file));

    expect(inserts).toEqual(['src/events/record.ts']);
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
