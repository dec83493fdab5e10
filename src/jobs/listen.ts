// Wakes workers when jobs are added: LISTEN on a dedicated PostgreSQL connection (reconnected when
// it breaks; workers poll meanwhile), or the embedded database's own LISTEN. A notification names
// the queue that has new work.
import pg from 'pg';
import { embeddedDatabaseOf, type Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import { backoffMs } from './backoff.js';
import { JOBS_CHANNEL } from './queue.js';

export interface JobListener {
  /** Calls `wake` with the queue's name on each notification. */
  subscribe(wake: (queue: string) => void): void;
  close(): Promise<void>;
}

/** `channel`: JOBS_CHANNEL unless given (the event stream listens on its own). */
export function createJobListener(options: { db: Db; databaseUrl: string | undefined; logger: Logger; channel?: string }): JobListener {
  const channel = options.channel ?? JOBS_CHANNEL;
  const subscribers: Array<(queue: string) => void> = [];
  const notify = (queue: string) => {
    for (const wake of subscribers) wake(queue);
  };
  const pglite = embeddedDatabaseOf(options.db);
  if (pglite) {
    const unlisten = pglite.listen(channel, notify);
    return {
      subscribe: (wake) => void subscribers.push(wake),
      async close() {
        await (await unlisten)().catch(() => {});
      },
    };
  }
  if (!options.databaseUrl) throw new Error('a job listener needs DATABASE_URL or the embedded database');
  return pgListener(options.databaseUrl, channel, options.logger, notify, subscribers);
}

function pgListener(url: string, channel: string, logger: Logger, notify: (queue: string) => void, subscribers: Array<(queue: string) => void>): JobListener {
  let client: pg.Client | undefined;
  let closed = false;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let warned = false;

  const connect = async (): Promise<void> => {
    if (closed) return;
    const next = new pg.Client({ connectionString: url, keepAlive: true });
    next.on('error', () => {});
    next.on('end', () => {
      if (client === next) client = undefined;
      schedule();
    });
    next.on('notification', (message) => {
      if (message.payload) notify(message.payload);
    });
    try {
      await next.connect();
      await next.query(`listen ${channel}`);
      if (closed) {
        await next.end();
        return;
      }
      client = next;
      failures = 0;
      if (warned) logger.info({ channel }, 'job notifications are back');
      warned = false;
      // Jobs may have been added while the connection was down: look now.
      notify('*');
    } catch (err) {
      await next.end().catch(() => {});
      if (!warned) logger.warn({ channel, err: (err as Error).message }, 'job notifications unavailable; workers poll until they are back');
      warned = true;
      schedule();
    }
  };
  const schedule = (): void => {
    if (closed || timer) return;
    failures += 1;
    timer = setTimeout(
      () => {
        timer = undefined;
        void connect();
      },
      backoffMs(failures, { baseMs: 250, maxMs: 5_000, jitter: 0 }),
    );
    timer.unref();
  };
  void connect();
  return {
    subscribe: (wake) => void subscribers.push(wake),
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await client?.end().catch(() => {});
    },
  };
}
