// npm run fuzz -- --runs N [--seed S] [--op id,...] [--replay id:round:path] [--shrink] [--strict]
// Starts the app on a loopback port (DATABASE_URL's PostgreSQL, else an in-memory PGlite), runs the
// contract fuzzing properties of test/fuzz against it, prints per-operation counts and the seed, and
// exits 1 with the counterexample when a property fails. Server errors are logged on stderr.
// --shrink minimises a failing case; --strict fails on the KNOWN_ISSUES too.
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { OperationId } from '../src/contract.js';
import { startServer } from '../test/helpers/server.js';
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
// The suite's own way to run the app (DATABASE_URL's PostgreSQL, else an in-memory PGlite; REDIS_URL), logging to stderr.
const server = await startServer({ logs: pino.destination(2), logLevel: process.env.LOG_LEVEL ?? 'error' });
const started = Date.now();
let failed: boolean;
try {
  process.stdout.write(`database: ${process.env.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : 'PGlite (in memory)'}\n`);
  const result = await runFuzz({ ...options, server, log: (line) => process.stdout.write(`${line}\n`) });
  process.stdout.write(`${formatCounts(result)}\n(${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  for (const failure of result.failures) process.stdout.write(`\n${formatFailure(result, failure)}\n`);
  failed = result.failures.length > 0;
} finally {
  await server.close();
}
// Set after closing: closing PGlite resets process.exitCode.
process.exit(failed ? 1 : 0);
