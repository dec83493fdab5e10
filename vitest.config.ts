import fs from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { namedTestFiles, slowTier } from './test/tiers.js';

// `npm test` runs the fast tier; `npm run test:all` (TEST_TIER=all) and a command naming test files run every file.
const files = fs.readdirSync('test', { recursive: true, encoding: 'utf8' }).map((file) => `test/${file}`);
const everyFile = process.env.TEST_TIER === 'all' || namedTestFiles(process.argv, files).length > 0;
if (!everyFile) {
  process.stdout.write(
    `npm test: the fast tier; ${Object.keys(slowTier).length} slow files run in \`npm run test:all\` only: ${Object.keys(slowTier).join(', ')}\n`,
  );
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...(everyFile ? [] : Object.keys(slowTier))],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Files run side by side, each in a database of its own (test/global-setup.ts); most of their time
    // is spent waiting on sockets, so more workers than cores. VITEST_MAX_WORKERS overrides.
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: { NODE_ENV: 'test' },
  },
});
