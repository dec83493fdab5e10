// Which test files `npm test` (the fast tier) leaves to `npm run test:all`: those whose time goes to
// waiting on the world (processes started, killed, restarted, shut down; browsers; long fuzz runs), not
// to the code under test, and those timed against the wall clock (below), which must run alone. Every
// file runs in `npm run test:all` and in CI.
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
  'test/cors.browser.test.ts': 'calls the API from another origin in headless Chromium',
  'test/fuzz.test.ts': 'runs the property-based fuzzer over the contract',
  'test/pgbouncer.test.ts': 'starts PgBouncer and a PostgreSQL of its own',
  'test/bench-load.test.ts': 'runs the load generator against a server',
  'test/migrations.test.ts': 'migrates fresh databases up and down, one after another',
  'test/readme.test.ts': "starts the service as `npm start` does and runs the README's examples in order",
  'test/commands.test.ts': 'runs `npm run provision` and `npm run revoke` as processes, one after another',
  'test/delivery-instances.test.ts': 'starts service processes, kills one with SIGKILL and waits for another to take its jobs',
  'test/job-leases.test.ts': 'kills a service process mid-send and waits for another instance to take its leased jobs',
  'test/sla-timers.test.ts': 'waits three minutes of wall clock for an SLA timer added without a NOTIFY',
  'test/secrets-key.test.ts': 'starts service processes that refuse to start and waits for them to exit',
};

/** The test files a command line names (a path, or a part of one as vitest's filters take it), after `run`. */
export function namedTestFiles(argv: string[], files: string[]): string[] {
  const args = argv.slice(argv.indexOf('run') + 1);
  return args.filter((arg, i) => !arg.startsWith('-') && !/^(-t|--testNamePattern)$/.test(args[i - 1] ?? '') && files.some((file) => file.includes(arg)));
}

/**
 * Files asserting how long the service takes against the wall clock: in `npm run test:all` they run one
 * at a time, after the others (beside other workers their bounds fail from load, not from the code).
 */
export const timedFiles: Record<string, string> = {
  'test/slow-clients.test.ts': 'a normal client is served within a bound while slow sockets are cut at their limits',
  'test/automation-bounds.test.ts': 'a /healthz poll must answer within 250 ms while automations run (the event loop never held over 100 ms)',
  'test/rate-limit.test.ts': 'a burst must fit in one short window, and a frozen Redis may stall a request only up to its command timeout',
};

/**
 * The core paths (`TEST_TIER=core`): what differs between Node lines (the HTTP server and its sockets,
 * streams, fetch, crypto, timers), run by CI on Node 22 and 24; Node 20 runs every file.
 */
export const corePaths: Record<string, string> = {
  'test/platform.test.ts': "the HTTP pipeline's own answers: request ids, service endpoints, a broken or unreachable database",
  'test/contacts.test.ts': 'one resource end to end over HTTP: create, read, list, update, delete',
  'test/slow-clients.test.ts': "the HTTP server's header and body timeouts and connection limit against slow sockets",
  'test/stream.test.ts': 'Server-Sent Events: long-lived responses, resume, keep-alive',
  'test/stream-limits.test.ts': "streams' buffer limit and back-pressure on a slow reader's socket",
  'test/media.test.ts': 'uploads streamed to disk with their SHA-256; downloads with Range and If-None-Match',
  'test/media-spool.test.ts': 'a multipart upload spooled through streams',
  'test/outbound-http.test.ts': 'fetch (undici): body caps, time limits, abort, refused connections, pinned addresses',
  'test/webhook-ssrf.test.ts': 'DNS resolution and socket addresses checked before a webhook connects',
  'test/webhooks.test.ts': "HMAC-SHA256 over a webhook's raw body (node:crypto)",
  'test/secrets-at-rest.test.ts': 'AES-GCM sealing of secrets (node:crypto)',
  'test/delivery.test.ts': 'messages sent to the Graph API double over fetch, with retries',
};
