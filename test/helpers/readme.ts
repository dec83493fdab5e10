// The README's shell blocks as test/readme.test.ts runs them and test/readme-checks.test.ts checks them.
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

export interface ShellBlock {
  mark: string;
  line: number;
  code: string;
}

/** Every ```sh or ```bash block, with its mark (the fence's second word) and its line; indented blocks (in a list) unindented. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const fence = /^( *)```(?:sh|bash)\b ?(\S*)\n([\s\S]*?)^\1```$/gm;
  return [...markdown.matchAll(fence)].map((m) => ({
    mark: m[2]!,
    line: markdown.slice(0, m.index).split('\n').length,
    code: m[3]!.replace(new RegExp(`^${m[1]}`, 'gm'), ''),
  }));
}
