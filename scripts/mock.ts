// npm run mock: a mock of the API for front-end teams on http://127.0.0.1:4010/v1 (MOCK_PORT to
// change the port, MOCK_HOST the interface). Prism serves the examples of openapi.yaml on a
// loopback port of its own, from a copy of the contract whose paths carry the /v1 prefix; in front
// of it, scripts/mock-front.ts checks every request as the service does and makes Prism's examples
// look like real answers (fresh ids, echoed fields, the request id in errors).
// Meta's webhooks stay at /webhooks/meta/{channelId}, as the service serves them.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { loadSpec } from '../src/contract.js';
import { createLogger } from '../src/logger.js';
import { createMockFront } from './mock-front.js';

const port = Number(process.env.MOCK_PORT ?? '4010');
const host = process.env.MOCK_HOST || '127.0.0.1';
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`MOCK_PORT must be a port number, got "${process.env.MOCK_PORT}"\n`);
  process.exit(2);
}
const logger = createLogger(process.env.LOG_LEVEL || 'info');

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: free } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return free;
}

const spec = loadSpec();
// Paths with servers of their own (Meta's webhooks, served at the root) keep their path.
spec.paths = Object.fromEntries(
  Object.entries(spec.paths as Record<string, Record<string, unknown>>).map(([p, item]) => {
    if (!item.servers) return [`/v1${p}`, item];
    const { servers: _servers, ...rest } = item;
    return [p, rest];
  }),
);
const prismPort = await freePort();
spec.servers = [{ url: `http://127.0.0.1:${prismPort}`, description: 'Prism, behind the mock front' }];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'support-funnel-mock-'));
const file = path.join(dir, 'openapi.yaml');
fs.writeFileSync(file, stringify(spec));

const prismBin = fileURLToPath(new URL('../node_modules/.bin/prism', import.meta.url));
const prism = spawn(prismBin, ['mock', '--host', '127.0.0.1', '--port', String(prismPort), '--verboseLevel', 'warn', file], { stdio: 'inherit' });
// eslint-disable-next-line prefer-const -- set once Prism is up; a signal before that stops Prism alone
let front: ReturnType<ReturnType<typeof createMockFront>['listen']> | undefined;

const stop = (signal: NodeJS.Signals) => {
  front?.close();
  front?.closeAllConnections();
  prism.kill(signal);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
prism.on('exit', (code) => {
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(code ?? 0);
});

const prismUrl = `http://127.0.0.1:${prismPort}`;
const deadline = Date.now() + 120_000;
const probe = { headers: { authorization: `Bearer sfk_${'0'.repeat(43)}` } };
while (
  !(await fetch(`${prismUrl}/v1/channels`, probe).then(
    () => true,
    () => false,
  ))
) {
  if (Date.now() > deadline) {
    process.stderr.write('Prism did not start within 120 s\n');
    stop('SIGTERM');
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
front = createMockFront({ prismUrl, logger }).listen(port, host, () => {
  process.stderr.write(`\n  Support Funnel API mock on http://${host}:${port}/v1 (any well-formed sfk_ key; examples of openapi.yaml)\n\n`);
});
// As the service (KEEP_ALIVE_TIMEOUT_MS): an idle kept-alive connection stays open 65 s, so a client
// reusing it after a pause never races Node's default 5 s close (seen as "other side closed").
front.keepAliveTimeout = 65_000;
front.on('error', (err) => {
  process.stderr.write(`the mock cannot listen on ${host}:${port}: ${err.message}\n`);
  process.exitCode = 1;
  stop('SIGTERM');
});
