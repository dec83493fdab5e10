// npm run fuzz -- --runs N [--seed S] [--op id,...] [--replay id:round:path] [--shrink] [--strict]
// Starts the app on a loopback port (a new database of its own on DATABASE_URL's PostgreSQL, dropped
// at the end, else an in-memory PGlite), runs the
// contract fuzzing properties of test/fuzz against it, prints per-operation counts and the seed, and
// exits 1 with the counterexample when a property fails. Server errors are logged on stderr.
// --shrink minimises a failing case; --strict fails on the KNOWN_ISSUES too.
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { OperationId } from '../src/contract.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';
import { DEFAULT_SEED, formatCounts, formatFailure, runFuzz } from '../test/fuzz/properties.js';

const USAGE = 'usage: npm run fuzz -- --runs N [--seed S] [--op operationId,...] [--replay operationId:round:path] [--shrink] [--strict]';

function parse() {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '2000' },
      seed: { type: 'string' },
      op: { type: 'string' },
      replay: { type: 'string' },
      shrink: { type: 'boolean', default: false },
      strict: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const runs = Number(values.runs);
  const seed = values.seed === undefined ? DEFAULT_SEED : Number(values.seed);
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed)) throw new Error(USAGE);
  const replay = values.replay?.split(':');
  return {
    runs,
    seed,
    shrink: values.shrink,
    strict: values.strict,
    only: values.op?.split(',') as OperationId[] | undefined,
    replay: replay && { operationId: replay[0] as OperationId, round: Number(replay[1]), path: replay.slice(2).join(':') },
  };
}

let options;
try {
  options = parse();
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
// The suite's own way to run the app (REDIS_URL too), logging to stderr. On PostgreSQL, a database of
// its own: channels' Meta ids are unique across workspaces, so rows an earlier run left in a shared
// database would refuse the ids this run generates.
const own = process.env.DATABASE_URL ? await ownDatabase() : undefined;
// No workers and no inline automation runs, as test/fuzz.test.ts: the model keeps no automations' effects.
const server = await startServer({
  logs: pino.destination(2),
  logLevel: process.env.LOG_LEVEL ?? 'error',
  config: { automationsInline: false },
  ...(own && { databaseUrl: own.url }),
});
const started = Date.now();
let failed: boolean;
try {
  process.stdout.write(`database: ${own ? "PostgreSQL (a new database on DATABASE_URL's server)" : 'PGlite (in memory)'}\n`);
  const result = await runFuzz({ ...options, server, log: (line) => process.stdout.write(`${line}\n`) });
  process.stdout.write(`${formatCounts(result)}\n(${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  for (const failure of result.failures) process.stdout.write(`\n${formatFailure(result, failure)}\n`);
  failed = result.failures.length > 0;
} finally {
  await server.close();
  await own?.drop();
}
// Set after closing: closing PGlite resets process.exitCode.
process.exit(failed ? 1 : 0);
