// The repository itself: src/ has no import cycle, and nothing in the repository sends a reader to a
// document that is not in it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const tracked = (): string[] => execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);

/** Relative imports of a module (value and type imports alike), as files of src/. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const specifiers = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm)].map((m) => m[1]!);
  return specifiers.map((s) => path.join(path.dirname(file), s).replace(/\.js$/, '.ts')).filter((f) => f.startsWith('src/'));
}

/** Every cycle of the import graph, each as the path that closes it. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const walk = (node: string, trail: string[]): void => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'open') {
      found.push([...trail.slice(trail.indexOf(node)), node]);
      return;
    }
    state.set(node, 'open');
    for (const next of graph.get(node) ?? []) walk(next, [...trail, node]);
    state.set(node, 'done');
  };
  for (const node of graph.keys()) walk(node, []);
  return found;
}

describe('the source', () => {
  it('when every module of src/ is read, then no import leads back to the module it started from', () => {
    const modules = tracked().filter((f) => f.startsWith('src/') && f.endsWith('.ts') && !f.endsWith('.d.ts'));
    const graph = new Map(modules.map((m) => [m, importsOf(m)]));

    expect(modules.length).toBeGreaterThan(20);
    expect(cycles(graph)).toEqual([]);
  });
});

describe('references', () => {
  it('when the tracked files are read, then none cites a document kept outside the repository', () => {
    // Built from parts, so this file does not find itself.
    const outside = new RegExp(['DECI', 'SIONS', '|\\.\\./shared/'].join(''));
    const citing = tracked()
      .filter((f) => !f.startsWith('bench/results/') && !f.endsWith('package-lock.json'))
      .filter((f) => outside.test(fs.readFileSync(path.join(ROOT, f), 'utf8')));

    expect(citing).toEqual([]);
  });
});
