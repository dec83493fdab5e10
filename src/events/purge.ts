// The service deletes its own events past EVENT_RETENTION_DAYS (their deliveries with them): the task
// of the 'purge-events' schedule (jobs/kinds.ts), run hourly by one instance of the cluster.
import type { ScheduledTask } from '../jobs/recurring.js';
import { EVENT_RETENTION_DAYS, purgeOldEvents } from './record.js';

export const purgeEvents: ScheduledTask = async (trx, logger) => {
  const deleted = await purgeOldEvents(trx);
  if (deleted > 0) logger.info({ deleted }, `events older than ${EVENT_RETENTION_DAYS} days purged`);
};
