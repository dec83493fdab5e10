// The README's promises that need no server: every shell block says whether test/readme.test.ts runs
// it, and every environment variable src/config.ts reads (a renamed one under its first name too) is in the
// configuration table.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIRST_NAMES } from '../src/config.js';
import { README, ROOT, shellBlocks } from './helpers/readme.js';

describe('the README', () => {
  it('when its shell blocks are read, then each is marked readme-run (run by test/readme.test.ts) or readme-norun (needs what a fresh start has not)', () => {
    const blocks = shellBlocks(README);

    expect(blocks.filter((b) => b.mark === 'readme-run').length).toBeGreaterThan(10);
    expect(blocks.filter((b) => b.mark !== 'readme-run' && b.mark !== 'readme-norun').map((b) => `line ${b.line}: ${b.mark || '(no mark)'}`)).toEqual([]);
  });

  it('when src/config.ts is read, then every environment variable it reads, renamed ones under their first names too, is in the configuration table', () => {
    const source = fs.readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
    const read = new Set([
      ...[...source.matchAll(/env\.([A-Z][A-Z0-9_]+)|env, '([A-Z][A-Z0-9_]+)'/g)].map((m) => m[1] ?? m[2]!),
      ...Object.values(FIRST_NAMES),
    ]);
    const table = README.slice(README.indexOf('## Configuration'));
    // Each row's first cell: one name, two that go together, or a name and its first name.
    const documented = new Set([...table.matchAll(/^\| ([^|\n]+) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((n) => n[1]!)));

    expect(read.size).toBeGreaterThan(30);
    expect([...read].filter((name) => !documented.has(name))).toEqual([]);
  });
});
