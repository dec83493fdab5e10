// The job queue on its own (src/jobs): jobs of one key run one at a time in order, a claim is
// exclusive until its lease runs out, a running job's lease is renewed (and a job whose lease was
// taken meanwhile is aborted), retries wait their backoff and end in giveUp (expected ones logged at
// debug only), and stopping finishes or releases what is held. On the run's database (PostgreSQL or PGlite).
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { createJobListener, type JobListener } from '../src/jobs/listen.js';
import {
  CLAIM_PARAMETERS,
  claimJobs,
  enqueueJob,
  finishJob,
  finishJobs,
  finishJobsParameters,
  finishJobsSql,
  JOBS_CHANNEL,
  releaseJob,
  type Job,
} from '../src/jobs/queue.js';
import { batcher } from '../src/jobs/batch.js';
import { ABORTED_JOBS_WAIT_MS, startWorker, type JobResult, type QueueHandler } from '../src/jobs/worker.js';
import { createLogger } from '../src/logger.js';
import { LEVEL, LogCapture, waitFor } from './helpers/processes.js';
import { databaseUrl, openDatabase } from './helpers/server.js';

let db: Db;
let workspaceId: string;
const logger = createLogger('silent');
beforeAll(async () => {
  db = await openDatabase();
  workspaceId = randomUUID();
  await sql`insert into workspaces (id, name) values (${workspaceId}, 'Jobs')`.execute(db);
});
afterAll(async () => {
  await db.destroy();
});

/** Resolves once `listener` hears notifications: a probe on a queue of nobody's, sent until it arrives. */
async function listening(listener: JobListener): Promise<void> {
  const probe = queueName();
  let heard = false;
  listener.subscribe((queue) => (heard ||= queue === probe));
  await waitFor('the listener to hear a notification', async () => {
    await sql`select pg_notify(${JOBS_CHANNEL}, ${probe})`.execute(db);
    return heard;
  });
}

/** A queue name of the test's own, so no other test's worker takes its jobs. */
const queueName = () => `test-${randomUUID()}`;
const storedJobs = (queue: string) => db.selectFrom('jobs').selectAll().where('queue', '=', queue).orderBy('created_at').orderBy('id').execute();

describe('claiming', () => {
  it('when a key has several jobs, then only its oldest is claimable, and the next only once it is finished', async () => {
    const queue = queueName();
    const t = Date.now();
    for (const [key, n] of [
      ['a', 1],
      ['a', 2],
      ['b', 1],
      ['a', 3],
    ] as const) {
      await enqueueJob(db, { workspaceId, queue, orderingKey: key, payload: { key, n }, createdAt: new Date(t + n) });
    }

    const { jobs: first } = await claimJobs(db, { queue, workerId: 'w1', limit: 10, leaseMs: 60_000 });
    const { jobs: meanwhile } = await claimJobs(db, { queue, workerId: 'w2', limit: 10, leaseMs: 60_000 });
    await finishJob(
      db,
      first.find((j) => j.payload.key === 'a')!,
    );
    const { jobs: next } = await claimJobs(db, { queue, workerId: 'w2', limit: 10, leaseMs: 60_000 });

    expect(first.map((j) => j.payload).sort((x, y) => String(x.key).localeCompare(String(y.key)))).toEqual([
      { key: 'a', n: 1 },
      { key: 'b', n: 1 },
    ]);
    expect(first.every((j) => j.locked_by === 'w1' && j.attempts === 1)).toBe(true);
    expect(meanwhile).toEqual([]);
    expect(next.map((j) => j.payload)).toEqual([{ key: 'a', n: 2 }]);
  });

  it('when jobs are finished together, then each is deleted only if its claim still holds it', async () => {
    const queue = queueName();
    for (let i = 0; i < 3; i++) await enqueueJob(db, { workspaceId, queue, payload: { i } });
    const { jobs } = await claimJobs(db, { queue, workerId: 'w1', limit: 3, leaseMs: 60_000 });
    // The third's lease ran out and another instance took it.
    await sql`update jobs set locked_until = now() - interval '1 second' where id = ${jobs[2]!.id}`.execute(db);
    const {
      jobs: [taken],
    } = await claimJobs(db, { queue, workerId: 'w2', limit: 1, leaseMs: 60_000 });

    const finished = await finishJobs(db, jobs);

    expect(taken!.id).toBe(jobs[2]!.id);
    expect(finished).toBe(2);
    expect(await storedJobs(queue)).toEqual([expect.objectContaining({ id: taken!.id, locked_by: 'w2' })]);
  });

  it('when a claim prefetches, then each job carries what its prefetch read, and null where it read no row', async () => {
    const queue = queueName();
    await enqueueJob(db, { workspaceId, queue, payload: { workspace: 'known' }, createdAt: new Date(Date.now() - 1) });
    await enqueueJob(db, { workspaceId, queue, payload: { workspace: 'unknown' } });

    const { jobs } = await claimJobs(db, {
      queue,
      workerId: 'w1',
      limit: 2,
      leaseMs: 60_000,
      prefetch: (job) =>
        sql`select json_build_object('name', w.name) as prefetched from workspaces w where w.id = ${job.workspaceId} and ${job.payload('workspace')} = 'known'`,
    });

    expect(jobs.map((j) => [j.payload.workspace, j.prefetched])).toEqual([
      ['known', { name: 'Jobs' }],
      ['unknown', null],
    ]);
  });

  it('when a claim carries writes, then they commit in its statement, and when they fail, the claim fails and neither commits', async () => {
    const queue = queueName();
    for (let i = 0; i < 2; i++) await enqueueJob(db, { workspaceId, queue, payload: { i }, createdAt: new Date(Date.now() - 10 + i) });
    const { jobs: first } = await claimJobs(db, { queue, workerId: 'w1', limit: 1, leaseMs: 60_000 });
    const named = (name: string) => ({
      sql: `renamed as (update workspaces set name = $${CLAIM_PARAMETERS + 1} where id = $${CLAIM_PARAMETERS + 2}::uuid),
            finished as (${finishJobsSql(CLAIM_PARAMETERS + 3)})`,
      parameters: [name, workspaceId, ...finishJobsParameters(first)],
    });
    // A write that fails as it runs: the claim's jobs must stay where they were, the rename undone.
    const failing = {
      ...named('never'),
      sql: `${named('never').sql}, broken as (update workspaces set name = (1 / (length(name) - length(name)))::text where id = $${CLAIM_PARAMETERS + 2}::uuid)`,
    };
    await sql`update workspaces set name = 'Jobs' where id = ${workspaceId}`.execute(db);

    await expect(claimJobs(db, { queue, workerId: 'w2', limit: 1, leaseMs: 60_000, carry: failing })).rejects.toThrow(/division by zero/);
    const unchanged = await storedJobs(queue);
    const { jobs: next } = await claimJobs(db, { queue, workerId: 'w2', limit: 1, leaseMs: 60_000, carry: named('Jobs, carried') });

    expect(unchanged.map((j) => j.locked_by)).toEqual(['w1', null]);
    expect(next.map((j) => j.payload)).toEqual([{ i: 1 }]);
    expect(await storedJobs(queue)).toEqual([expect.objectContaining({ id: next[0]!.id, locked_by: 'w2' })]);
    expect((await db.selectFrom('workspaces').select('name').where('id', '=', workspaceId).executeTakeFirstOrThrow()).name).toBe('Jobs, carried');
    await sql`update workspaces set name = 'Jobs' where id = ${workspaceId}`.execute(db);
  });

  it('when a claim is released, then the job is claimable again and the attempt does not count', async () => {
    const queue = queueName();
    await enqueueJob(db, { workspaceId, queue, payload: {} });
    const {
      jobs: [held],
    } = await claimJobs(db, { queue, workerId: 'w1', limit: 1, leaseMs: 60_000 });

    await releaseJob(db, held!);
    const {
      jobs: [again],
    } = await claimJobs(db, { queue, workerId: 'w2', limit: 1, leaseMs: 60_000 });

    expect(again).toMatchObject({ id: held!.id, attempts: 1, locked_by: 'w2' });
    // The first holder's claim is gone: finishing with it does nothing.
    expect(await finishJob(db, held!)).toBe(false);
    expect(await storedJobs(queue)).toHaveLength(1);
  });

  it('when a lease runs out (its worker died), then another worker takes the job', async () => {
    const queue = queueName();
    await enqueueJob(db, { workspaceId, queue, payload: {} });
    const {
      jobs: [lost],
    } = await claimJobs(db, { queue, workerId: 'dead', limit: 1, leaseMs: 1 });
    // The scenario: a lease of 1 ms, outlived.
    await new Promise((resolve) => setTimeout(resolve, 20));

    const {
      jobs: [taken],
    } = await claimJobs(db, { queue, workerId: 'alive', limit: 1, leaseMs: 60_000 });

    expect(taken).toMatchObject({ id: lost!.id, locked_by: 'alive', attempts: 2 });
  });

  it('when jobs wait or a group is at its allowance, then the claim says when the next falls due and that it left jobs behind', async () => {
    const queue = queueName();
    const later = new Date(Date.now() + 60_000);
    await enqueueJob(db, { workspaceId, queue, payload: { to: 'a' } });
    await enqueueJob(db, { workspaceId, queue, payload: { to: 'a' } });
    await enqueueJob(db, { workspaceId, queue, payload: { to: 'b' }, runAt: later });

    const grouped = await claimJobs(db, { queue, workerId: 'w1', limit: 10, leaseMs: 60_000, groups: { field: 'to', allowance: { a: 1 }, otherwise: 10 } });
    const rest = await claimJobs(db, { queue, workerId: 'w2', limit: 10, leaseMs: 60_000 });
    const none = await claimJobs(db, { queue, workerId: 'w3', limit: 10, leaseMs: 60_000 });

    expect(grouped.jobs).toHaveLength(1);
    expect(grouped.leftBehind).toBe(true);
    expect(grouped.nextRunAt?.getTime()).toBe(later.getTime());
    expect(rest.jobs).toHaveLength(1);
    expect(rest.leftBehind).toBe(false);
    expect(none).toEqual({ jobs: [], nextRunAt: later, leftBehind: false });
  });

  it.skipIf(!databaseUrl)(
    "when a job commits after the claim's statement began, then the claim takes it, though the statement's own reads do not see it",
    async () => {
      const queue = queueName();
      const lock = [33, Math.floor(Math.random() * 2 ** 31)] as const;
      await db.connection().execute(async (holder) => {
        await sql`select pg_advisory_lock(${lock[0]}, ${lock[1]})`.execute(holder);
        // The statement's snapshot is taken as it starts; it then waits for the lock before calling claim_jobs.
        const claiming = sql<{ id: string | null; seen: number }>`
        select (c.job).id, (select count(*)::int from jobs where queue = ${queue}) as seen
          from (select pg_advisory_xact_lock(${lock[0]}, ${lock[1]}) as locked, ${queue}::text as queue offset 0) s,
               lateral claim_jobs(s.queue, 'w1', 1, 60000, null, null, 1, 1) c`.execute(db);
        await waitFor('the claim to wait for the lock', async () => {
          const { rows } = await sql<{ waiting: boolean }>`
          select exists (select 1 from pg_locks where locktype = 'advisory' and not granted and classid = ${lock[0]} and objid = ${lock[1]}) as waiting`.execute(
            holder,
          );
          return rows[0]!.waiting;
        });
        const id = await enqueueJob(holder, { workspaceId, queue, payload: {}, runAt: new Date(Date.now() - 60_000) });
        await sql`select pg_advisory_unlock(${lock[0]}, ${lock[1]})`.execute(holder);

        expect((await claiming).rows).toEqual([{ id, seen: 0 }]);
      });
    },
  );

  it.skipIf(!databaseUrl)('when 8 claimers race over 200 jobs of 20 keys, then no job is claimed twice and no key runs two at once', async () => {
    const queue = queueName();
    for (let i = 0; i < 200; i++) await enqueueJob(db, { workspaceId, queue, orderingKey: `k${i % 20}`, payload: { i } });
    const seen = new Map<string, number>();
    const running = new Set<string>();
    let overlap = false;
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (;;) {
          const { jobs } = await claimJobs(db, { queue, workerId: `w${w}`, limit: 3, leaseMs: 60_000 });
          if (jobs.length === 0 && (await storedJobs(queue)).length === 0) return;
          for (const job of jobs) {
            seen.set(job.id, (seen.get(job.id) ?? 0) + 1);
            if (running.has(job.ordering_key!)) overlap = true;
            running.add(job.ordering_key!);
          }
          // The scenario: a job takes a moment, so claims overlap.
          await new Promise((resolve) => setTimeout(resolve, 2));
          for (const job of jobs) {
            running.delete(job.ordering_key!);
            await finishJob(db, job);
          }
        }
      }),
    );
    expect(seen.size).toBe(200);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(overlap).toBe(false);
  });
});

describe('the worker', () => {
  function handler(queue: string, run: (job: Job, signal: AbortSignal) => Promise<JobResult>, gaveUp: string[] = []): QueueHandler {
    return {
      queue,
      maxAttempts: 3,
      retryBaseMs: 10,
      run,
      async giveUp(job, error) {
        gaveUp.push(error);
        await finishJob(db, job);
      },
    };
  }
  const options = { db, logger, concurrency: 4, leaseMs: 60_000, pollMs: 50 };

  it('when a job is added, then the notification wakes the worker before its poll would', async () => {
    const queue = queueName();
    const listener = createJobListener({ db, databaseUrl, logger });
    const ran: number[] = [];
    const worker = startWorker(
      handler(queue, async () => (ran.push(Date.now()), { kind: 'done' })),
      { ...options, db, listener, pollMs: 60_000 },
    );
    try {
      // Settled first: the listener hears notifications, and the worker ran a first job and went back to sleep.
      await listening(listener);
      await enqueueJob(db, { workspaceId, queue, payload: {} });
      await waitFor('the first job ran', async () => ran.length === 1 && (await storedJobs(queue)).length === 0 && worker.running() === 0, 5_000);
      ran.length = 0;
      const added = Date.now();
      await db.transaction().execute((trx) => enqueueJob(trx, { workspaceId, queue, payload: {} }));

      await waitFor('the job ran', () => ran.length === 1, 5_000);

      expect(ran[0]! - added).toBeLessThan(2_000);
      await waitFor('finished', async () => (await storedJobs(queue)).length === 0);
    } finally {
      await worker.stop(AbortSignal.timeout(1_000));
      await listener.close();
    }
  });

  it('when a job keeps failing passingly, then it is tried maxAttempts times with growing waits and then given up', async () => {
    const queue = queueName();
    const tries: number[] = [];
    const gaveUp: string[] = [];
    const worker = startWorker(
      handler(queue, async () => (tries.push(Date.now()), { kind: 'retry', error: `try ${tries.length}` }), gaveUp),
      { ...options, db },
    );
    try {
      await enqueueJob(db, { workspaceId, queue, payload: {} });

      await waitFor('given up and settled', () => gaveUp.length === 1 && worker.running() === 0, 5_000);

      expect(tries).toHaveLength(3);
      expect(gaveUp).toEqual(['try 3']);
      expect(tries[1]! - tries[0]!).toBeGreaterThanOrEqual(7);
      expect(tries[2]! - tries[1]!).toBeGreaterThanOrEqual(15);
      expect(await storedJobs(queue)).toEqual([]);
    } finally {
      await worker.stop(AbortSignal.timeout(1_000));
    }
  });

  it('when a group allowance left a job behind, then it runs as soon as a slot frees, not at the next poll', async () => {
    const queue = queueName();
    const ran: number[] = [];
    await enqueueJob(db, { workspaceId, queue, payload: { to: 'a' } });
    await enqueueJob(db, { workspaceId, queue, payload: { to: 'a' } });
    const worker = startWorker(
      {
        ...handler(queue, async () => {
          ran.push(Date.now());
          // The scenario: a job that takes 100 ms.
          await new Promise((resolve) => setTimeout(resolve, 100));
          return { kind: 'done' };
        }),
        // One job at a time per group.
        claimGroups: () => ({ field: 'to', allowance: {}, otherwise: 1 }),
      },
      { ...options, db, pollMs: 60_000 },
    );
    try {
      await waitFor('both ran', () => ran.length === 2, 5_000);

      expect(ran[1]! - ran[0]!).toBeGreaterThanOrEqual(90);
      expect(ran[1]! - ran[0]!).toBeLessThan(2_000);
    } finally {
      await worker.stop(AbortSignal.timeout(1_000));
    }
  });

  it('when a job runs for several leases, then its worker renews the lease and no other worker can claim it meanwhile', async () => {
    const queue = queueName();
    const leaseMs = 600;
    let finish!: () => void;
    const running = new Promise<void>((resolve) => (finish = resolve));
    let runs = 0;
    const worker = startWorker(
      handler(queue, async () => {
        runs++;
        await running;
        return { kind: 'done' };
      }),
      { ...options, db, leaseMs },
    );
    try {
      await enqueueJob(db, { workspaceId, queue, payload: {} });
      await waitFor('running', () => runs === 1);
      const [claimed] = await storedJobs(queue);
      const leases: number[] = [];
      const claimsByOthers: Job[] = [];

      // Past two more leases: without renewal the job would have been free to claim twice over.
      await waitFor(
        'two leases past the first',
        async () => {
          const [row] = await storedJobs(queue);
          leases.push(row!.locked_until!.getTime());
          claimsByOthers.push(...(await claimJobs(db, { queue, workerId: 'other', limit: 1, leaseMs: 60_000 })).jobs);
          return Date.now() > claimed!.locked_until!.getTime() + 2 * leaseMs;
        },
        10_000,
      );
      finish();
      await waitFor('finished', () => worker.running() === 0);

      expect(claimed).toMatchObject({ locked_by: worker.id, attempts: 1 });
      expect(claimsByOthers).toEqual([]);
      expect(Math.max(...leases)).toBeGreaterThan(claimed!.locked_until!.getTime() + leaseMs);
      expect(runs).toBe(1);
      expect(await storedJobs(queue)).toEqual([]);
    } finally {
      finish();
      await worker.stop(AbortSignal.timeout(1_000));
    }
  });

  it('when a running job is taken by another instance (its lease ran out), then the job is aborted and its outcome is not recorded', async () => {
    const queue = queueName();
    const logs = new LogCapture();
    let aborted = false;
    let started = false;
    const worker = startWorker(
      handler(queue, (_job, signal) => {
        started = true;
        return new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          }),
        );
      }),
      { ...options, db, logger: createLogger('info', logs.destination), leaseMs: 300 },
    );
    try {
      await enqueueJob(db, { workspaceId, queue, payload: {} });
      await waitFor('running', () => started);
      // As when the database was out of reach for longer than the lease: the lease runs out and another instance claims the job.
      // In one transaction: the worker's renewal of its lease, due every 100 ms, must not come in between (it then waits, and
      // finds the job taken).
      const {
        jobs: [taken],
      } = await db.transaction().execute(async (trx) => {
        await sql`update jobs set locked_until = now() - interval '1 second' where queue = ${queue}`.execute(trx);
        return claimJobs(trx, { queue, workerId: 'other', limit: 1, leaseMs: 60_000 });
      });

      await waitFor('aborted', () => aborted && worker.running() === 0, 5_000);

      expect(taken).toMatchObject({ locked_by: 'other', attempts: 2 });
      expect(await storedJobs(queue)).toEqual([expect.objectContaining({ id: taken!.id, locked_by: 'other', attempts: 2, last_error: null })]);
      expect(logs.matching(/^another instance took a running job/, LEVEL.warn)).toEqual([expect.objectContaining({ jobId: taken!.id })]);
    } finally {
      await worker.stop(AbortSignal.timeout(1_000));
    }
  });

  it('when a job retries as expected and is given up, then its retries are logged at debug and nothing above', async () => {
    const queue = queueName();
    const logs = new LogCapture();
    const gaveUp: string[] = [];
    const worker = startWorker(
      handler(queue, async () => ({ kind: 'retry', error: 'not yet', expected: true }), gaveUp),
      {
        ...options,
        db,
        logger: createLogger('debug', logs.destination),
      },
    );
    try {
      const jobId = await enqueueJob(db, { workspaceId, queue, payload: {} });

      await waitFor('given up and settled', () => gaveUp.length === 1 && worker.running() === 0, 5_000);

      const lines = logs.lines.filter((line) => line.jobId === jobId);
      expect(lines.map((line) => [line.level, line.msg])).toEqual([
        [LEVEL.debug, 'job failed; will retry'],
        [LEVEL.debug, 'job failed; will retry'],
        [LEVEL.debug, 'job failed on its last attempt; giving up'],
      ]);
    } finally {
      await worker.stop(AbortSignal.timeout(1_000));
    }
  });

  it('when it stops with a job running past the deadline, then the job is aborted and released for another instance', async () => {
    const queue = queueName();
    let started = false;
    const worker = startWorker(
      handler(queue, (_job, signal) => {
        started = true;
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
      }),
      { ...options, db },
    );
    await enqueueJob(db, { workspaceId, queue, payload: {} });
    await waitFor('running', () => started);

    await worker.stop(AbortSignal.timeout(100));

    expect(await storedJobs(queue)).toEqual([expect.objectContaining({ locked_by: null, locked_until: null, attempts: 0 })]);
  });

  it('when it stops with a job that ignores its abort, then the stop ends soon after its deadline and leaves the job to its lease', async () => {
    const queue = queueName();
    let started = false;
    let release: () => void = () => {};
    const worker = startWorker(
      handler(queue, () => {
        started = true;
        // The scenario: a job stuck on something its abort signal does not reach.
        return new Promise<JobResult>((resolve) => (release = () => resolve({ kind: 'done' })));
      }),
      { ...options, db, leaseMs: 1_500 },
    );
    await enqueueJob(db, { workspaceId, queue, payload: {} });
    await waitFor('running', () => started);

    const stopping = Date.now();
    await worker.stop(AbortSignal.timeout(100));
    const took = Date.now() - stopping;
    // The job ends after the stop: its outcome is not recorded (the lease decides who runs it).
    release();
    await new Promise((resolve) => setTimeout(resolve, 50));

    expect(took).toBeGreaterThanOrEqual(100 + ABORTED_JOBS_WAIT_MS - 50);
    expect(took).toBeLessThan(100 + ABORTED_JOBS_WAIT_MS + 2_000);
    const [stored] = await storedJobs(queue);
    expect(stored).toEqual(expect.objectContaining({ attempts: 1, locked_by: expect.any(String) }));
    // Not renewed since the stop: the lease runs out, and another worker may claim the job.
    const { jobs } = await claimJobs(db, { queue, workerId: 'next', limit: 1, leaseMs: 60_000 });
    expect(jobs).toEqual([]);
    await waitFor('the lease ran out', async () => (await claimJobs(db, { queue, workerId: 'next', limit: 1, leaseMs: 60_000 })).jobs.length === 1, 5_000);
  });

  it('when it stops with a job that finishes within the deadline, then the job is finished, not released', async () => {
    const queue = queueName();
    let started = false;
    const worker = startWorker(
      handler(queue, async () => {
        started = true;
        // The scenario: a job that takes 200 ms, well within the stop's deadline.
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { kind: 'done' };
      }),
      { ...options, db },
    );
    await enqueueJob(db, { workspaceId, queue, payload: {} });
    await waitFor('running', () => started);

    await worker.stop(AbortSignal.timeout(5_000));

    expect(await storedJobs(queue)).toEqual([]);
  });
});

describe('gathering (batcher)', () => {
  it('when the open batch is taken, then its flush never runs and its adds settle as the taker says', async () => {
    const flushed: number[][] = [];
    const gather = batcher<number>(async (items) => void flushed.push(items), { delayMs: 5, max: 10 });
    const adds = [gather.add(1), gather.add(2)];
    const taken = gather.take();
    const failed = gather.add(3);
    gather.take()!.settled(new Error('the claim failed'));
    const later = gather.add(4);

    taken!.settled();
    await Promise.all(adds);
    await expect(failed).rejects.toThrow('the claim failed');
    await later;

    expect(taken!.items).toEqual([1, 2]);
    expect(gather.take()).toBeUndefined();
    expect(flushed).toEqual([[4]]);
  });
});
