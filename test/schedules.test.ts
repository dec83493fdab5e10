// Recurring work (the event and Idempotency-Key purges) runs as scheduled jobs, once per cluster:
// two instances on one database add one job per schedule and run each once per interval, and a
// stopped cluster's schedules go on when an instance starts again. On PostgreSQL, each instance
// with its own connections; on PGlite, two instances' workers on the one embedded database.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { SCHEDULES, type ScheduleName } from '../src/jobs/kinds.js';
import { RECURRING_QUEUE } from '../src/jobs/recurring.js';
import { startWorkers } from '../src/workers.js';
import { createLogger } from '../src/logger.js';
import { LogCapture, waitFor } from './helpers/processes.js';
import { databaseUrl, openDatabase, ownDatabase, type OwnDatabase } from './helpers/server.js';

/** The schedules' interval here: short, so a few intervals pass in a second or two. */
const EVERY_MS = 400;
/** Rounding: a run's start is its log line's time less its `ms`, each in whole milliseconds. */
const SLACK_MS = 5;
const SCHEDULE_NAMES = Object.keys(SCHEDULES) as ScheduleName[];

let own: OwnDatabase | undefined;
let shared: Db | undefined;
beforeAll(async () => {
  // The workers take every recurring job of their database: one of the test's own.
  if (databaseUrl) own = await ownDatabase();
  else shared = await openDatabase();
});
afterAll(async () => {
  await own?.drop();
});

interface Instance {
  db: Db;
  logs: LogCapture;
  stop(): Promise<void>;
}

/** An instance's background work, as src/server.ts starts it, with short schedule intervals. */
function startInstance(): Instance {
  const db = own ? createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 3 }) : shared!;
  const logs = new LogCapture();
  const config = { ...loadConfig({ NODE_ENV: 'test' }), databaseUrl: own?.url, jobPollMs: 100 };
  const everyMs = Object.fromEntries(SCHEDULE_NAMES.map((name) => [name, EVERY_MS]));
  const jobs = startWorkers({ db, config, logger: createLogger('debug', logs.destination), secrets: undefined, scheduleEveryMs: everyMs });
  return {
    db,
    logs,
    async stop() {
      await jobs.stop(AbortSignal.timeout(5_000));
      if (own) await db.destroy();
    },
  };
}

/** When each run of a schedule started, over all `instances`, in order. */
function runsOf(instances: Instance[], schedule: ScheduleName): number[] {
  return instances
    .flatMap((instance) => instance.logs.matching(/^scheduled work done$/).filter((line) => line.schedule === schedule))
    .map((line) => (line.time as number) - (line.ms as number))
    .sort((a, b) => a - b);
}

const scheduleJobs = (db: Db) =>
  sql<{ schedule: string; run_at: Date }>`select payload->>'schedule' as schedule, run_at from jobs where queue = ${RECURRING_QUEUE} order by 1`
    .execute(db)
    .then((result) => result.rows);

describe('recurring schedules', () => {
  it('when two instances start together, then each schedule is one job and runs once per interval, whichever instance runs it', async () => {
    const instances = [startInstance(), startInstance()];
    try {
      await waitFor('five runs of each schedule', () => SCHEDULE_NAMES.every((name) => runsOf(instances, name).length >= 5), 20_000);

      const rows = await scheduleJobs(instances[0]!.db);
      expect(rows.map((row) => row.schedule)).toEqual([...SCHEDULE_NAMES].sort());
      for (const name of SCHEDULE_NAMES) {
        const runs = runsOf(instances, name);
        const gaps = runs.slice(1).map((at, i) => at - runs[i]!);
        // The next run counts from the start of the run's transaction, which follows the run's start:
        // runs are at least an interval apart. Per-instance timers would run twice per interval.
        expect(Math.min(...gaps)).toBeGreaterThanOrEqual(EVERY_MS - SLACK_MS);
      }
    } finally {
      await Promise.all(instances.map((instance) => instance.stop()));
    }
  });

  it('when the cluster stopped, then its schedules go on when an instance starts again, and purge what expired meanwhile', async () => {
    // The cluster of the test before has stopped; its schedules wait in the table.
    const db = own ? createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 1 }) : shared!;
    try {
      const before = await scheduleJobs(db);
      expect(before).toHaveLength(SCHEDULE_NAMES.length);
      const workspaceId = randomUUID();
      const eventId = randomUUID();
      await sql`insert into workspaces (id, name) values (${workspaceId}, 'Schedules')`.execute(db);
      await sql`insert into events (workspace_id, id, type, data, created_at)
                values (${workspaceId}, ${eventId}, 'contact.created', '{}', now() - interval '31 days')`.execute(db);
      await sql`insert into idempotency_keys (workspace_id, api_key_id, key, method, path, body_sha256, status, response, created_at)
                values (${workspaceId}, ${randomUUID()}, 'old', 'POST', '/v1/contacts', '', 201, '{}', now() - interval '25 hours')`.execute(db);
      const left = async () =>
        (
          await sql<{ n: number }>`select (select count(*) from events where workspace_id = ${workspaceId})::int
                                       + (select count(*) from idempotency_keys where workspace_id = ${workspaceId})::int as n`.execute(db)
        ).rows[0]!.n;
      expect(await left()).toBe(2);

      const instance = startInstance();
      try {
        await waitFor('the expired event and key purged', async () => (await left()) === 0);
        await waitFor('a run of each schedule', () => SCHEDULE_NAMES.every((name) => runsOf([instance], name).length >= 1));
      } finally {
        await instance.stop();
      }

      const after = await scheduleJobs(db);
      expect(after.map((row) => row.schedule)).toEqual(before.map((row) => row.schedule));
      after.forEach((row, i) => expect(row.run_at.getTime()).toBeGreaterThan(before[i]!.run_at.getTime()));
    } finally {
      if (own) await db.destroy();
    }
  });
});
