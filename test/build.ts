// TEST_BUILD=dist: the suite runs against the build (`npm run build` first) instead of the TypeScript
// sources. In process, every import of src/ resolves to its compiled dist/src/*.js (vitest's
// resolve.alias); as a process, the service and the commands start as `node dist/...js`, the way a
// production deployment runs them. `npm start` and the npm commands take the build on their own when
// it is as new as the sources (scripts/run.mjs).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const testBuild = process.env.TEST_BUILD === 'dist';

/** vitest's resolve.alias: `../src/x.js` (from any depth) to dist/src/x.js under TEST_BUILD=dist, nothing otherwise. */
export function buildAliases(): Array<{ find: RegExp; replacement: string }> {
  if (!testBuild) return [];
  if (!fs.existsSync(path.join(root, 'dist', '.build-stamp'))) throw new Error('TEST_BUILD=dist needs a build: run `npm run build` first');
  return [{ find: /^(?:\.\.\/)+src\/(.*)$/, replacement: `${path.join(root, 'dist', 'src')}/$1` }];
}

/** Node's arguments that run an entry point (`src/server`, `scripts/migrate`) from the sources through tsx, or from the build. */
export function entryArgs(entry: string): string[] {
  return testBuild ? [path.join('dist', `${entry}.js`)] : ['--import', 'tsx', `${entry}.ts`];
}
