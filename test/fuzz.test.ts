// Contract fuzzing in the suite: 2,000+ requests generated from openapi.yaml, split across every
// operation, against the real app (test/fuzz). Bugs it found and that are not fixed yet are listed
// in KNOWN_ISSUES; each has a test below that starts passing (and so fails here) once it is fixed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations } from '../src/contract.js';
import { DEFAULT_SEED, formatCounts, formatFailure, KNOWN_ISSUES, probeKnownIssue, runFuzz } from './fuzz/properties.js';
import { databaseUrl, startServer, type TestServer } from './helpers/server.js';

const RUNS = 2000;
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : DEFAULT_SEED;

let server: TestServer;
beforeAll(async () => {
  // Keys are verified once a minute, not on every one of the thousands of requests.
  // No workers, and no automation run inline either (a customer's message's runs are queued as jobs
  // nobody claims): the model keeps no automations' effects (test/fuzz/properties.ts, "no runs").
  server = await startServer({ config: { keyCacheTtlMs: 60_000, automationsInline: false } });
});
afterAll(async () => {
  await server.close();
});

describe('contract fuzzing', () => {
  it('when 2,000 requests are generated from openapi.yaml across every operation, then every property holds', async () => {
    const result = await runFuzz({ runs: RUNS, seed: SEED, server });

    console.log(`${formatCounts(result)}\nknown issues present: ${result.present.map((issue) => issue.id).join(', ') || 'none'}`);
    expect(result.failures.map((failure) => formatFailure(result, failure))).toEqual([]);
    expect(Object.keys(result.operations).sort()).toEqual(contractOperations.map((op) => op.operationId).sort());
    expect(result.total).toBeGreaterThanOrEqual(RUNS);
  }, 240_000);

  const database = databaseUrl ? 'postgres' : 'pglite';
  const issues = KNOWN_ISSUES.filter((issue) => !issue.onlyOn || issue.onlyOn === database);
  it.fails.each(issues.map((issue) => [issue.id, issue.summary]))(
    'known issue %s still shows (when this passes, the issue is fixed: delete its KNOWN_ISSUES entry)',
    async (id) => {
      expect(await probeKnownIssue(server, id)).toBe(false);
    },
  );
});
