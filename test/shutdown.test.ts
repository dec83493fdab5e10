// Stopping the service as an orchestrator does (SIGTERM, SIGINT): it stops accepting, closes idle
// keep-alive connections, answers what is in flight with `Connection: close`, logs the drain with
// its counts, and exits 0 — or 1 when SHUTDOWN_TIMEOUT_MS passed and a request had to be cut.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { createBackgroundWork } from '../src/shutdown.js';
import { freePort, LEVEL, sleep, waitFor, waitForExit } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';

interface RawExchange {
  socket: net.Socket;
  received: string;
  closedAt?: number;
}

/** A raw keep-alive connection: send what you like, read what comes back. */
async function connect(port: number): Promise<RawExchange> {
  const socket = net.connect(port, '127.0.0.1');
  const exchange: RawExchange = { socket, received: '' };
  socket.on('data', (chunk) => (exchange.received += chunk.toString()));
  socket.on('close', () => (exchange.closedAt = Date.now()));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return exchange;
}

const refused = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });

const dirs: string[] = [];
let service: Service | undefined;

/** The service on the embedded database of a fresh directory; its demo key. */
async function startService(env: Record<string, string> = {}): Promise<{ service: Service; port: number; apiKey: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-shutdown-'));
  dirs.push(dir);
  const port = await freePort();
  service = new Service(port, { DATABASE_URL: '', REDIS_URL: '', PGLITE_DIR: path.join(dir, 'pglite'), ...env });
  await service.waitForListening(1);
  const { apiKey } = JSON.parse(fs.readFileSync(path.join(dir, 'demo-key.json'), 'utf8')) as { apiKey: string };
  return { service, port, apiKey };
}

/** Headers and the first half of an agent's body: the request is in flight until the rest comes. */
function startAgentRequest(exchange: RawExchange, apiKey: string): () => void {
  const body = JSON.stringify({ name: 'Ana', instructions: 'Seja breve.', model: 'gpt-4o-mini' });
  const half = Math.floor(body.length / 2);
  exchange.socket.write(
    `POST /v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, half)}`,
  );
  return () => exchange.socket.write(body.slice(half));
}

afterEach(async () => {
  await service?.kill();
  service = undefined;
});
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

describe('SIGTERM and SIGINT', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'when %s arrives with a request in flight and an idle keep-alive connection, then it stops accepting, closes the idle one, answers the other with Connection: close and exits 0',
    async (signal) => {
      const { service, port, apiKey } = await startService();
      const idle = await connect(port);
      idle.socket.write(`GET /v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n\r\n`);
      await waitFor('the idle connection answered', () => idle.received.includes('"pagination"'));
      const inFlight = await connect(port);
      const finish = startAgentRequest(inFlight, apiKey);
      // Time for the request to reach its handler; if it has not, the drain logs inFlight 0 and this test fails.
      await sleep(200);

      const signalledAt = Date.now();
      process.kill(service.child.pid!, signal);
      await waitFor('the drain to start', () => service.logs.matching(/^draining$/).length > 0);
      const refusedWhileDraining = await refused(port);
      await waitFor('the idle connection closed', () => idle.closedAt !== undefined, 2_000);
      finish();
      const exit = await waitForExit(service.child, 10_000);

      expect(refusedWhileDraining).toBe(true);
      expect(idle.closedAt! - signalledAt).toBeLessThan(1_000);
      expect(inFlight.received).toMatch(/^HTTP\/1\.1 201 Created\r\n/);
      expect(inFlight.received.toLowerCase()).toContain('\r\nconnection: close\r\n');
      expect(inFlight.closedAt).toBeDefined();
      expect(exit).toEqual({ code: 0, signal: null });
      expect(service.logs.matching(/^draining$/, LEVEL.info)).toMatchObject([{ signal, inFlight: 1, timeoutMs: 10_000 }]);
      expect(service.logs.matching(/^stopped$/, LEVEL.info)).toMatchObject([{ inFlight: 1, answered: 1, cut: 0, unfinished: [] }]);
    },
    START_MS + 20_000,
  );

  it(
    'when a request is still unfinished at SHUTDOWN_TIMEOUT_MS, then it is cut, the drain logs it and the exit code is 1',
    async () => {
      const { service, port, apiKey } = await startService({ SHUTDOWN_TIMEOUT_MS: '1000' });
      const stuck = await connect(port);
      startAgentRequest(stuck, apiKey);
      // Time for the request to reach its handler; if it has not, the exit is 0 and this test fails.
      await sleep(200);

      const signalledAt = Date.now();
      process.kill(service.child.pid!, 'SIGTERM');
      const exit = await waitForExit(service.child, 10_000);

      expect(exit).toEqual({ code: 1, signal: null });
      expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(1_000);
      expect(stuck.closedAt).toBeDefined();
      expect(service.logs.matching(/^stopped$/, LEVEL.warn)).toMatchObject([{ inFlight: 1, answered: 0, cut: 1 }]);
    },
    START_MS + 20_000,
  );

  it(
    'when nothing is in flight, then SIGTERM exits 0 at once',
    async () => {
      const { service } = await startService();

      const signalledAt = Date.now();
      process.kill(service.child.pid!, 'SIGTERM');
      const exit = await waitForExit(service.child, 10_000);

      expect(exit).toEqual({ code: 0, signal: null });
      expect(Date.now() - signalledAt).toBeLessThan(3_000);
      expect(service.logs.matching(/^stopped$/, LEVEL.info)).toMatchObject([{ inFlight: 0, cut: 0 }]);
    },
    START_MS + 20_000,
  );
});

describe('the background-work registry', () => {
  it('when the process stops, then every registered worker is asked once, and those that fail or miss the deadline are named', async () => {
    const background = createBackgroundWork(createLogger('silent'));
    const asked: string[] = [];
    background.register('delivery', async () => {
      asked.push('delivery');
    });
    background.register('broken', async () => {
      asked.push('broken');
      throw new Error('could not release');
    });
    background.register('slow', async (deadline) => {
      asked.push('slow');
      await new Promise((resolve) => deadline.addEventListener('abort', resolve));
    });

    const unfinished = await background.stopAll(AbortSignal.timeout(100));

    expect(asked.sort()).toEqual(['broken', 'delivery', 'slow']);
    expect(unfinished.sort()).toEqual(['broken', 'slow']);
    expect(() => background.register('delivery', async () => {})).not.toThrow();
  });

  it('when a name is registered twice, then registration throws', () => {
    const background = createBackgroundWork(createLogger('silent'));
    background.register('delivery', async () => {});

    expect(() => background.register('delivery', async () => {})).toThrow(/already registered/);
  });
});
