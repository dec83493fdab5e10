// Which test files `npm test` (the fast tier) leaves to `npm run test:all`: those whose time goes to
// waiting on the world (processes started, killed, restarted, shut down; browsers; long fuzz runs), not
// to the code under test. Every file runs in `npm run test:all` and in CI.
export const slowTier: Record<string, string> = {
  'test/shutdown.test.ts': 'starts the service as a process and waits out its drain and deadlines',
  'test/db-restart.test.ts': 'initdb and restarts a PostgreSQL cluster of its own',
  'test/automation-kill.test.ts': 'kills service processes mid-transaction and waits for leases to expire',
  'test/media-kill.test.ts': 'kills service processes mid-upload and waits for leases to expire',
  'test/process-failures.test.ts': 'starts service processes that crash and waits for them to exit',
  'test/cluster.test.ts': 'starts a cluster of service processes',
  'test/metrics-process.test.ts': 'starts clusters of service processes and scrapes them',
  'test/docs.browser.test.ts': 'drives /docs in headless Chromium',
  'test/stream.browser.test.ts': 'drives the event stream in headless Chromium',
  'test/fuzz.test.ts': 'runs the property-based fuzzer over the contract',
  'test/pgbouncer.test.ts': 'starts PgBouncer and a PostgreSQL of its own',
  'test/bench-load.test.ts': 'runs the load generator against a server',
  'test/migrations.test.ts': 'migrates fresh databases up and down, one after another',
  'test/readme.test.ts': "starts the service as `npm start` does and runs the README's examples in order",
};

/** The test files a command line names (a path, or a part of one as vitest's filters take it), after `run`. */
export function namedTestFiles(argv: string[], files: string[]): string[] {
  const args = argv.slice(argv.indexOf('run') + 1);
  return args.filter((arg, i) => !arg.startsWith('-') && !/^(-t|--testNamePattern)$/.test(args[i - 1] ?? '') && files.some((file) => file.includes(arg)));
}

/** Files asserting how long the service takes against the wall clock: they run one at a time, after the others. */
export const timedFiles: Record<string, string> = {
  'test/slow-clients.test.ts': 'a normal client is served within a bound while slow sockets are cut at their limits',
  'test/automation-bounds.test.ts': 'a /healthz poll must answer within 250 ms while automations run (the event loop never held over 100 ms)',
  'test/rate-limit.test.ts': 'a burst must fit in one short window, and a frozen Redis may stall a request only up to its command timeout',
};
