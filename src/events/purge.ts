// The service deletes its own events past 30 days (their deliveries with them), hourly, as a
// registered background task so a stopping process waits for a purge under way.
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import type { BackgroundWork } from '../shutdown.js';
import { purgeOldEvents } from './record.js';

export function startEventPurge(db: Db, logger: Logger, background: BackgroundWork, everyMs = 3_600_000): void {
  const purge = () =>
    purgeOldEvents(db).then(
      (deleted) => {
        if (deleted > 0) logger.info({ deleted }, 'events older than 30 days purged');
      },
      (err: unknown) => logger.warn({ err }, 'purging old events failed; next try in an hour'),
    );
  let running = purge();
  const timer = setInterval(() => (running = purge()), everyMs);
  timer.unref();
  background.register('event-purge', async () => {
    clearInterval(timer);
    await running;
  });
}
