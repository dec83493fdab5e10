// Recurring work as jobs, once per cluster: each schedule of kinds.ts is one job of the `recurring`
// queue with a fixed id, which every instance adds when it is missing (instances starting together
// add one) and whose run does the schedule's task and moves the same job to its next run in one
// transaction. Whichever instance claims it runs it; a stopped cluster's schedules wait in the table
// and go on when an instance starts again.
import { v5 as uuidv5 } from 'uuid';
import { transact, type Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import { SCHEDULES, type ScheduleName } from './kinds.js';
import { enqueueOnce, rescheduleJob } from './queue.js';
import type { QueueHandler } from './worker.js';

export const RECURRING_QUEUE = 'recurring';

/** The workspace_id of the cluster's own jobs, which belong to no workspace (migration 0012). */
export const NO_WORKSPACE = '00000000-0000-0000-0000-000000000000';

/** The namespace of the schedules' job ids (UUIDv5 of the schedule's name). */
const SCHEDULE_IDS = 'b3d5c0e8-52f4-4d5e-9a8e-5f0c1a7e2d41';

/** The fixed id of a schedule's job: one per cluster, whoever adds it. */
export const scheduleJobId = (schedule: ScheduleName): string => uuidv5(schedule, SCHEDULE_IDS);

/** A schedule's work, in the transaction that moves its job to the next run. */
export type ScheduledTask = (trx: Db, logger: Logger) => Promise<void>;

class LostClaim extends Error {}

/**
 * The worker's handler of the recurring schedules: `tasks` has one task per schedule of kinds.ts
 * (a missing one fails the type check); `everyMs` changes their intervals (tests). A task that
 * fails is logged and tried again at its next run, not sooner, as any other run would be.
 */
export function recurringHandler(options: {
  db: Db;
  logger: Logger;
  tasks: Record<ScheduleName, ScheduledTask>;
  everyMs?: Partial<Record<ScheduleName, number>> | undefined;
}): QueueHandler<typeof RECURRING_QUEUE> {
  const { db, tasks } = options;
  const log = options.logger.child({ queue: RECURRING_QUEUE });
  const everyMs = (schedule: ScheduleName): number => options.everyMs?.[schedule] ?? SCHEDULES[schedule].everyMs;
  const known = (schedule: string): schedule is ScheduleName => Object.hasOwn(SCHEDULES, schedule);

  return {
    queue: RECURRING_QUEUE,
    // A failed run is not retried sooner: its next run is its retry.
    maxAttempts: 1,
    retryBaseMs: 1_000,

    async prepare() {
      for (const schedule of Object.keys(SCHEDULES) as ScheduleName[]) {
        await enqueueOnce(db, RECURRING_QUEUE, scheduleJobId(schedule), { schedule }, { workspaceId: NO_WORKSPACE });
      }
    },

    async run(job) {
      const { schedule } = job.payload;
      // A schedule this version no longer has.
      if (!known(schedule)) return { kind: 'done' };
      const started = Date.now();
      try {
        await transact(db, async (trx) => {
          await tasks[schedule](trx, log);
          if (!(await rescheduleJob(trx, job, everyMs(schedule)))) throw new LostClaim();
        });
        log.debug({ schedule, jobId: job.id, ms: Date.now() - started }, 'scheduled work done');
      } catch (err) {
        // Another instance runs it now (this lease ran out): its work was rolled back here.
        if (err instanceof LostClaim) throw err;
        log.warn({ err, schedule }, 'scheduled work failed; it runs again at its next time');
        // Should this fail too (the database is away), the lease runs out and a claim runs it again.
        await rescheduleJob(db, job, everyMs(schedule), (err as Error).message ?? String(err)).catch(() => {});
      }
      return { kind: 'finished' };
    },

    // Only after run threw (a lost claim): if this instance still holds the job, its next run stands.
    async giveUp(job, lastError) {
      if (known(job.payload.schedule)) await rescheduleJob(db, job, everyMs(job.payload.schedule), lastError);
    },
  };
}
