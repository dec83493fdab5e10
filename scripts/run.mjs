// Runs an entry point of the service (`node scripts/run.mjs src/server`, `... scripts/migrate`):
// from the build (dist/<entry>.js, plain node) when there is one at least as new as the sources it
// was made from, otherwise from the TypeScript sources through tsx (a development dependency), with a
// note that `npm run build` makes starts fast. A deployment that ships dist/ without the sources
// always runs the build. The entry runs in this process (signals, exit codes and node:cluster's
// forks behave as with `node dist/src/server.js`). Plain JavaScript: it runs before any build.
import fs from 'node:fs';
import process from 'node:process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const entry = process.argv[2];
if (!entry || !/^(src|scripts)\/[\w-]+$/.test(entry)) {
  process.stderr.write('usage: node scripts/run.mjs src/server|scripts/<command> [args...]\n');
  process.exit(2);
}
// What the entry reads is its arguments, as if it had been started itself.
process.argv.splice(2, 1);

/** What a build is made from (tsconfig.build.json's inputs, and the contract copied next to them). */
const SOURCES = ['src', 'scripts', 'generated', 'openapi.yaml', 'tsconfig.json', 'tsconfig.build.json'];

function newestMtime(file) {
  let stat;
  try {
    stat = fs.statSync(file);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const name of fs.readdirSync(file)) newest = Math.max(newest, newestMtime(path.join(file, name)));
  return newest;
}

/** 'fresh', 'stale' (sources changed since) or 'none'. */
function buildState() {
  let stamp;
  try {
    stamp = fs.statSync(path.join(root, 'dist', '.build-stamp')).mtimeMs;
  } catch {
    return 'none';
  }
  if (!fs.existsSync(path.join(root, 'dist', `${entry}.js`))) return 'none';
  const newest = Math.max(...SOURCES.map((source) => newestMtime(path.join(root, source))));
  return newest > stamp ? 'stale' : 'fresh';
}

const state = buildState();
if (state === 'fresh') {
  await import(pathToFileURL(path.join(root, 'dist', `${entry}.js`)).href);
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      state === 'stale'
        ? 'dist/ is older than the sources and tsx (a development dependency) is not installed: run `npm run build`\n'
        : 'no build in dist/ and tsx (a development dependency) is not installed: run `npm run build`, or `npm install` with development dependencies\n',
    );
    process.exit(1);
  }
  // Only the service's start says it; the operator commands keep their output one JSON object.
  if (entry === 'src/server' && process.env.NODE_ENV !== 'test') {
    process.stderr.write(
      `running from the TypeScript sources (${state === 'stale' ? 'dist/ is older than them' : 'no build'}); \`npm run build\` makes starts fast\n`,
    );
  }
  register();
  await import(pathToFileURL(path.join(root, `${entry}.ts`)).href);
}
