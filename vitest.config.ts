import fs from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { buildAliases } from './test/build.js';
import { namedTestFiles, slowTier, timedFiles } from './test/tiers.js';

// `npm test` runs the fast tier; `npm run test:all` (TEST_TIER=all) and a command naming test files run every file.
const files = fs.readdirSync('test', { recursive: true, encoding: 'utf8' }).map((file) => `test/${file}`);
const everyFile = process.env.TEST_TIER === 'all' || namedTestFiles(process.argv, files).length > 0;
if (!everyFile) {
  process.stdout.write(
    `npm test: the fast tier; ${Object.keys(slowTier).length} slow files run in \`npm run test:all\` only: ${Object.keys(slowTier).join(', ')}\n`,
  );
}
const slow = Object.keys(slowTier);
const timed = Object.keys(timedFiles);

export default defineConfig({
  // TEST_BUILD=dist: against the build (test/build.ts).
  resolve: { alias: buildAliases() },
  test: {
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: { NODE_ENV: 'test' },
    projects: [
      // Side by side, each file in a database of its own (test/global-setup.ts): most of their time is
      // spent waiting on sockets and the database, so more workers than cores.
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...slow, ...timed], maxWorkers: 3 } },
      ...(everyFile ? [{ extends: true as const, test: { name: 'slow', include: slow, maxWorkers: 3, sequence: { groupOrder: 1 } } }] : []),
      // Files that measure time against the machine's clock run alone, once the others are done.
      { extends: true, test: { name: 'timed', include: timed, maxWorkers: 1, sequence: { groupOrder: 2 } } },
    ],
  },
});
