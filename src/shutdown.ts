// The one place a stopping process asks its background work (message delivery, webhook deliveries,
// AI calls) to stop: each registered worker stops taking work at once, then finishes or releases
// what it holds before the deadline.
import type { Logger } from './logger.js';

/**
 * Called once when the process stops. Stop taking new work now; finish what is running, or release
 * it (unlock it for another instance) when `deadline` aborts. Resolve when nothing is held.
 */
export type StopWork = (deadline: AbortSignal) => Promise<void>;

export interface BackgroundWork {
  register(name: string, stop: StopWork): void;
  /** Stops every registered worker; the names of those that failed or missed the deadline. */
  stopAll(deadline: AbortSignal): Promise<string[]>;
}

export function createBackgroundWork(logger: Logger): BackgroundWork {
  const workers = new Map<string, StopWork>();
  return {
    register(name, stop) {
      if (workers.has(name)) throw new Error(`background work "${name}" is already registered`);
      workers.set(name, stop);
    },
    async stopAll(deadline) {
      const results = await Promise.all(
        [...workers].map(async ([name, stop]) => {
          try {
            await stop(deadline);
            return deadline.aborted ? name : undefined;
          } catch (err) {
            logger.error({ err, worker: name }, 'background work failed to stop');
            return name;
          }
        }),
      );
      workers.clear();
      return results.filter((name): name is string => name !== undefined);
    },
  };
}
