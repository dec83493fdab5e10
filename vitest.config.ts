import fs from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { buildAliases } from './test/build.js';
import { corePaths, namedTestFiles, slowTier, timedFiles } from './test/tiers.js';

// `npm test` runs the fast tier; `npm run test:all` (TEST_TIER=all) and a command naming test files run every file;
// TEST_TIER=core the core paths only (CI on Node 22 and 24).
const files = fs.readdirSync('test', { recursive: true, encoding: 'utf8' }).map((file) => `test/${file}`);
const core = process.env.TEST_TIER === 'core' ? Object.keys(corePaths) : undefined;
const everyFile = process.env.TEST_TIER === 'all' || namedTestFiles(process.argv, files).length > 0;
if (core) {
  process.stdout.write(`TEST_TIER=core: the core paths only (test/tiers.ts): ${core.join(', ')}\n`);
} else if (!everyFile) {
  const left = [...Object.keys(slowTier), ...Object.keys(timedFiles)];
  process.stdout.write(`npm test: the fast tier; ${left.length} files run in \`npm run test:all\` only (test/tiers.ts says why): ${left.join(', ')}\n`);
}
const slow = Object.keys(slowTier);
const timed = Object.keys(timedFiles);
const FAST_WORKERS = 3;

export default defineConfig({
  // TEST_BUILD=dist: against the build (test/build.ts).
  resolve: { alias: buildAliases() },
  test: {
    globalSetup: ['test/global-setup.ts'],
    // Before each file: a database of the file's own (a clone of the run's migrated template).
    setupFiles: ['test/setup-file.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: { NODE_ENV: 'test' },
    projects: [
      // Side by side, each file in a database of its own (test/setup-file.ts): most of their time is
      // spent waiting on sockets and the database, so more workers than cores. A worker keeps its
      // modules from one file to the next (isolate: false): importing the app again for each file was
      // most of the run's time. A file restores what it changes (environment, globals, timers).
      {
        extends: true,
        test: {
          name: 'fast',
          include: core ?? ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...slow, ...timed],
          maxWorkers: FAST_WORKERS,
          isolate: false,
        },
      },
      ...(everyFile && !core ? [{ extends: true as const, test: { name: 'slow', include: slow, maxWorkers: 3, sequence: { groupOrder: 1 } } }] : []),
      // Files that measure time against the machine's clock run alone, once the others are done.
      ...(everyFile || core
        ? [
            {
              extends: true as const,
              test: { name: 'timed', include: core ? timed.filter((file) => core.includes(file)) : timed, maxWorkers: 1, sequence: { groupOrder: 2 } },
            },
          ]
        : []),
    ],
  },
});
