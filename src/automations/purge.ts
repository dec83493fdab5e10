// Automations' runs past RUN_RETENTION_DAYS are deleted: the task of the 'purge-automation-runs'
// schedule (jobs/kinds.ts), run hourly by one instance of the cluster.
import { purgeOldRuns, RUN_RETENTION_DAYS } from '../db/automation-runs.js';
import type { ScheduledTask } from '../jobs/recurring.js';

export const purgeAutomationRuns: ScheduledTask = async (trx, logger) => {
  const deleted = await purgeOldRuns(trx);
  if (deleted > 0) logger.info({ deleted }, `automation runs older than ${RUN_RETENTION_DAYS} days purged`);
};
