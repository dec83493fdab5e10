// The service as operators run it: `node src/server.ts` with WEB_CONCURRENCY=2 forks two workers
// (node:cluster) on one port over one PostgreSQL and one Redis; SIGTERM stops every process.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { checkResponse } from './helpers/contract.js';
import { freePort, LEVEL, waitFor, waitForExit } from './helpers/processes.js';
import { databaseUrl, openDatabase, ownDatabase, redisUrl, type OwnDatabase } from './helpers/server.js';
import { alive, Service, START_MS } from './helpers/service.js';

interface Reply {
  status: number;
  requestId: string;
}

/** One GET on a connection of its own, so the primary hands each request to the next worker. */
function get(port: number, urlPath: string, apiKey: string): Promise<Reply> {
  const requestId = `cluster-${randomUUID()}`;
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, agent: false, headers: { authorization: `Bearer ${apiKey}`, 'x-request-id': requestId } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          try {
            const headers = new Headers(Object.entries(res.headers).map(([k, v]) => [k, String(v)] as [string, string]));
            checkResponse('GET', `http://127.0.0.1:${port}${urlPath}`, res.statusCode!, headers, text === '' ? undefined : JSON.parse(text));
            resolve({ status: res.statusCode!, requestId });
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function getMany(count: number, port: number, apiKey: string): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i++) replies.push(await get(port, '/v1/agents', apiKey));
  return replies;
}

describe.skipIf(!databaseUrl || !redisUrl)('WEB_CONCURRENCY=2 node src/server.ts (needs PostgreSQL and Redis)', () => {
  let db: Db;
  let own: OwnDatabase;
  let service: Service;
  let port: number;
  let workerPids: number[] = [];
  const everyPid = new Set<number>();

  /** The pid of the process that logged the access line of each request. */
  async function servedBy(replies: Reply[]): Promise<number[]> {
    const pidOf = (id: string) => service.logs.lines.find((line) => line.msg === 'request' && line.reqId === id)?.pid;
    await waitFor('the access log lines of the requests', () => replies.every((r) => pidOf(r.requestId) !== undefined), 5_000);
    return replies.map((r) => pidOf(r.requestId)!);
  }

  beforeAll(async () => {
    // Its workers would take (and move on) other files' message deliveries: a database of its own.
    own = await ownDatabase();
    db = await openDatabase(own.url);
    port = await freePort();
    service = new Service(port, { WEB_CONCURRENCY: '2', DATABASE_URL: own.url, REDIS_URL: redisUrl! });
    workerPids = await service.waitForListening(2);
    workerPids.forEach((pid) => everyPid.add(pid));
  }, START_MS + 10_000);

  afterAll(async () => {
    await service?.kill();
    for (const pid of everyPid) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await db?.destroy();
    await own?.drop();
  });

  it('when it starts, then a primary and two workers of their own run, and the workers serve requests by turns', async () => {
    const { apiKey } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES] });

    const replies = await getMany(20, port, apiKey);

    expect(new Set(workerPids).size).toBe(2);
    expect(workerPids).not.toContain(service.child.pid);
    expect(replies.map((r) => r.status)).toEqual(new Array(20).fill(200));
    expect(new Set(await servedBy(replies))).toEqual(new Set(workerPids));
  });

  it('when a free key sends 70 requests across the workers, then exactly 60 succeed in the window', async () => {
    const { apiKey } = await provision(db, { plan: 'free', scopes: [...SCOPES] });

    const replies = await getMany(70, port, apiKey);

    expect(replies.map((r) => r.status)).toEqual([...new Array(60).fill(200), ...new Array(10).fill(429)]);
    const successes = replies.filter((r) => r.status === 200);
    expect(new Set(await servedBy(successes))).toEqual(new Set(workerPids));
  });

  it(
    'when a worker dies, then the primary starts another in its place',
    async () => {
      const [dead, survivor] = workerPids as [number, number];
      const { apiKey } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES] });

      process.kill(dead, 'SIGKILL');
      const listening = await service.waitForListening(3);
      const replacement = listening[2]!;
      everyPid.add(replacement);
      workerPids = [survivor, replacement];
      const replies = await getMany(10, port, apiKey);

      expect(alive(dead)).toBe(false);
      expect(service.logs.matching(/^worker exited; starting another$/, LEVEL.error)).toMatchObject([{ workerPid: dead, signal: 'SIGKILL' }]);
      expect([dead, survivor, service.child.pid]).not.toContain(replacement);
      expect(replies.map((r) => r.status)).toEqual(new Array(10).fill(200));
      expect(new Set(await servedBy(replies))).toEqual(new Set(workerPids));
    },
    START_MS + 10_000,
  );

  it('when the primary gets SIGTERM, then the workers stop and every process exits', async () => {
    const exitsBefore = service.logs.matching(/worker exited/).length;

    process.kill(service.child.pid!, 'SIGTERM');
    const exit = await waitForExit(service.child, 20_000);

    expect(exit).toEqual({ code: 0, signal: null });
    expect([...everyPid].filter(alive)).toEqual([]);
    const draining = service.logs.matching(/^draining$/, LEVEL.info).map((line) => line.pid);
    expect(new Set(draining)).toEqual(new Set(workerPids));
    expect(service.logs.matching(/^stopped$/, LEVEL.info)).toMatchObject([{ cut: 0 }, { cut: 0 }]);
    expect(service.logs.matching(/worker exited/)).toHaveLength(exitsBefore);
    await expect(get(port, '/v1/agents', 'sfk_x')).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe.skipIf(!databaseUrl || !redisUrl)('WEB_CONCURRENCY=2 on a port already taken (needs PostgreSQL and Redis)', () => {
  let holder: net.Server;
  let service: Service;
  let own: OwnDatabase | undefined;
  afterAll(async () => {
    await service?.kill();
    await new Promise((resolve) => holder?.close(resolve));
    await own?.drop();
  });

  it(
    'when no worker can start, then the service exits 1 instead of forking workers forever',
    async () => {
      holder = net.createServer();
      const port = await freePort();
      await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));

      own = await ownDatabase();
      service = new Service(port, { WEB_CONCURRENCY: '2', DATABASE_URL: own.url, REDIS_URL: redisUrl! });
      const exit = await waitForExit(service.child, START_MS);

      expect(exit).toEqual({ code: 1, signal: null });
      expect(service.stderr).toContain('EADDRINUSE');
      expect(service.logs.matching(/^a worker failed to start; stopping$/, LEVEL.error)).toHaveLength(1);
      expect(service.logs.matching(/starting another/)).toEqual([]);
    },
    START_MS + 10_000,
  );
});
