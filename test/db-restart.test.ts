// The service through PostgreSQL restarts, as an operator meets them: a cluster of the test's own
// is restarted (`-m fast`) and stopped outright (`-m immediate`) and started again while clients
// write. The process stays up, the outage answers 503 quickly, no acknowledged write is lost, and
// full service is back within a second of PostgreSQL accepting connections.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../src/db/database.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { checkResponse } from './helpers/contract.js';
import { postgresBinaries, PrivatePostgres, type StopMode } from './helpers/postgres.js';
import { freePort, sleep } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';

const bin = postgresBinaries();
if (!bin) {
  process.stdout.write(
    `\nPostgreSQL's server binaries (initdb, pg_ctl) were not found: the database-restart tests are ${process.env.CI ? 'FAILING (CI runs them)' : 'SKIPPED'}.\n`,
  );
}

const WRITERS = 8;
/** "None waits more than a few seconds": the pool wait is 2 s, so 5 s bounds every answer. */
const MAX_ANSWER_MS = 5_000;
const RECOVERY_MS = 1_000;

interface Attempt {
  sentAt: number;
  answeredAt: number;
  status: number | 'network error';
  id?: string;
  detail?: string;
}

/** Clients writing contacts back to back until stopped; every attempt recorded. */
function startWriters(baseUrl: string, apiKey: string): { attempts: Attempt[]; stop(): Promise<void> } {
  const attempts: Attempt[] = [];
  let running = true;
  const writer = async () => {
    while (running) {
      const sentAt = Date.now();
      const url = `${baseUrl}/v1/contacts`;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `Cliente ${randomUUID()}` }),
          signal: AbortSignal.timeout(15_000),
        });
        const body = (await response.json()) as { id?: string; error?: { code: string } };
        checkResponse('POST', url, response.status, response.headers, body);
        attempts.push({
          sentAt,
          answeredAt: Date.now(),
          status: response.status,
          ...(body.id && { id: body.id }),
          ...(body.error && { detail: body.error.code }),
        });
      } catch (err) {
        attempts.push({ sentAt, answeredAt: Date.now(), status: 'network error', detail: (err as Error).message });
        await sleep(50);
      }
    }
  };
  const all = Array.from({ length: WRITERS }, writer);
  return {
    attempts,
    async stop() {
      running = false;
      await Promise.all(all);
    },
  };
}

interface Outage {
  mode: StopMode;
  /** When PostgreSQL first accepted a connection again. */
  upAt: number;
  /** Until when its recovery is judged: the next outage's stop, or the end. */
  until: number;
}

/**
 * Requests sent after `upAt` that were not answered 201, among those answered before `until`: a
 * request still in flight when the next outage begins is that outage's 503, not a slow recovery.
 */
function failuresAfter(attempts: Attempt[], outage: Outage): Attempt[] {
  return attempts.filter((a) => a.sentAt >= outage.upAt && a.answeredAt < outage.until && a.status !== 201).sort((a, b) => a.sentAt - b.sentAt);
}

/** From `upAt`, how long until every request sent is answered 201 (up to `until`). */
function recoveryMs(attempts: Attempt[], outage: Outage): number {
  const last = failuresAfter(attempts, outage).at(-1);
  return last ? last.sentAt - outage.upAt + 1 : 0;
}

describe.skipIf(!bin && !process.env.CI)('PostgreSQL restarts under writes (a private cluster)', () => {
  let postgres: PrivatePostgres;
  const services: Service[] = [];
  const dbs: Db[] = [];

  beforeAll(async () => {
    if (!bin) throw new Error("CI runs the database-restart tests: install PostgreSQL's server binaries (initdb, pg_ctl)");
    postgres = await PrivatePostgres.create(bin, 'sf_one');
  }, 120_000);

  afterAll(async () => {
    for (const service of services) await service.kill();
    for (const db of dbs) await db.destroy().catch(() => {});
    await postgres?.destroy();
  });

  /** Polls until PostgreSQL accepts a connection; the time it first did. */
  async function upAgain(): Promise<number> {
    const deadline = Date.now() + 60_000;
    while (!(await postgres.accepts())) {
      if (Date.now() > deadline) throw new Error('PostgreSQL did not accept connections again within 60 s');
      await sleep(20);
    }
    return Date.now();
  }

  it.each([
    ['one process', 1],
    ['two workers', 2],
  ])(
    'when PostgreSQL restarts fast and stops immediately under writes (%s), then nothing dies, the outage is 503 and every 201 is stored',
    async (_label, workers) => {
      const database = `sf_${workers}_${Date.now()}`;
      const admin = new pg.Client({ connectionString: postgres.url() });
      await admin.connect();
      await admin.query(`create database ${database}`);
      await admin.end();
      const port = await freePort();
      const service = new Service(port, {
        DATABASE_URL: postgres.url(database),
        REDIS_URL: '',
        WEB_CONCURRENCY: String(workers),
        DATABASE_POOL_WAIT_MS: '2000',
      });
      services.push(service);
      const pids = await service.waitForListening(workers);
      const db = createDatabase({ databaseUrl: postgres.url(database), pgliteDir: 'memory://', poolSize: 2 });
      dbs.push(db);
      const { apiKey } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES] });
      const baseUrl = `http://127.0.0.1:${port}`;

      const writers = startWriters(baseUrl, apiKey);
      // The scenario's timeline: writes before, between and after two restarts (each wait is a stretch of load).
      await sleep(1_500);
      await postgres.stop('fast');
      await postgres.start();
      const fastUp = await upAgain();
      await sleep(2_500);
      const immediateDown = Date.now();
      await postgres.stop('immediate');
      await sleep(1_000);
      await postgres.start();
      const immediateUp = await upAgain();
      await sleep(2_500);
      await writers.stop();
      const end = Date.now();

      const { attempts } = writers;
      const outages: Outage[] = [
        { mode: 'fast', upAt: fastUp, until: immediateDown },
        { mode: 'immediate', upAt: immediateUp, until: end },
      ];
      const created = attempts.filter((a) => a.status === 201);
      const unavailable = attempts.filter((a) => a.status === 503);
      const stored = await db
        .selectFrom('contacts')
        .select('id')
        .where(
          'id',
          'in',
          created.map((a) => a.id!),
        )
        .execute();
      const recovery = outages.map((outage) => recoveryMs(attempts, outage));
      const slowest = Math.max(...attempts.map((a) => a.answeredAt - a.sentAt));
      process.stdout.write(
        `\n[db-restart, ${workers} worker(s)] requests ${attempts.length}, 201 ${created.length}, 503 ${unavailable.length}, ` +
          `other ${attempts.length - created.length - unavailable.length}, lost writes ${created.length - stored.length}, ` +
          `slowest answer ${slowest} ms, back to full service ${recovery.map((ms, i) => `${ms} ms after -m ${outages[i]!.mode}`).join(', ')}\n`,
      );

      expect(service.running).toBe(true);
      expect(service.listening()).toEqual(pids);
      expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
      expect(attempts.filter((a) => a.status !== 201 && a.status !== 503)).toEqual([]);
      expect(unavailable.every((a) => a.detail === 'service_unavailable')).toBe(true);
      expect(unavailable.length).toBeGreaterThan(0);
      expect(slowest).toBeLessThan(MAX_ANSWER_MS);
      expect(stored.length).toBe(created.length);
      for (const [i, ms] of recovery.entries()) {
        const failures = failuresAfter(attempts, outages[i]!).map((a) => ({
          ...a,
          sentAfterUpMs: a.sentAt - outages[i]!.upAt,
          tookMs: a.answeredAt - a.sentAt,
        }));
        const causes = service.logs.lines
          .filter(
            (line) => line.msg === 'request failed: service unavailable' && Number(line.time) >= outages[i]!.upAt && Number(line.time) < outages[i]!.until,
          )
          .map((line) => line.cause);
        if (ms > RECOVERY_MS)
          expect.fail(
            `-m ${outages[i]!.mode}: ${ms} ms to full service; failures: ${JSON.stringify(failures.slice(0, 5))}; causes: ${JSON.stringify([...new Set(causes)])}`,
          );
      }
      // 503s are warnings: an outage is not a bug.
      expect(service.logs.lines.filter((line) => line.level >= 50)).toEqual([]);
    },
    START_MS + 90_000,
  );

  it(
    'when PostgreSQL runs with autovacuum off, then the service says so at start, and not when it runs with it on',
    async () => {
      const admin = new pg.Client({ connectionString: postgres.url() });
      await admin.connect();
      const database = `sf_vacuum_${Date.now()}`;
      await admin.query(`create database ${database}`);
      const startedOn = async (): Promise<Service> => {
        const service = new Service(await freePort(), { DATABASE_URL: postgres.url(database), REDIS_URL: '' });
        services.push(service);
        await service.waitForListening(1);
        return service;
      };
      const warnings = (service: Service) => service.logs.lines.filter((line) => line.level === 40 && String(line.msg).includes('autovacuum off'));
      try {
        const withIt = await startedOn();
        await withIt.kill();
        await admin.query('alter system set autovacuum = off');
        await admin.query('select pg_reload_conf()');
        const without = await startedOn();
        await without.kill();

        expect(warnings(withIt)).toEqual([]);
        expect(warnings(without)).toEqual([
          expect.objectContaining({
            msg: "PostgreSQL runs with autovacuum off: the tables' statistics go stale as they grow and lookups turn into scans; turn it on, or run ANALYZE regularly",
          }),
        ]);
      } finally {
        await admin.query('alter system reset autovacuum');
        await admin.query('select pg_reload_conf()');
        await admin.end();
      }
    },
    2 * START_MS,
  );
});
