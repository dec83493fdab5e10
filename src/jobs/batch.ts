// Gathers calls made close together into one: each add() joins the open batch and resolves with
// that batch's flush, which runs `delayMs` after the batch's first item (0: after the current turn
// of the event loop, setImmediate) or as soon as it holds `max` items. A round trip to PostgreSQL
// costs the service about as much CPU for one row as for fifty (BENCHMARKS.md, issue 34), so the
// queue's finishes and the webhook outcomes go through one of these. Pure: no I/O of its own.

export interface Batcher<T> {
  /** Adds `item` to the open batch; resolves when that batch is flushed, rejects with the flush's error. */
  add(item: T): Promise<void>;
  /** Items waiting for their flush. */
  pending(): number;
  /**
   * Takes the open batch out, its flush cancelled, for the caller to write in a statement it sends
   * anyway; the caller then calls `settled` with that statement's error (or none) to resolve or
   * reject the batch's add() calls. Undefined when no batch is open.
   */
  take(): { items: T[]; settled: (err?: unknown) => void } | undefined;
}

export function batcher<T>(flush: (items: T[]) => Promise<void>, options: { delayMs: number; max: number }): Batcher<T> {
  let items: T[] = [];
  let waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  let timer: NodeJS.Timeout | NodeJS.Immediate | undefined;

  const open = (): { batch: T[]; settled: (err?: unknown) => void } => {
    if (timer !== undefined) {
      if (options.delayMs > 0) clearTimeout(timer as NodeJS.Timeout);
      else clearImmediate(timer as NodeJS.Immediate);
      timer = undefined;
    }
    const [batch, waiting] = [items, waiters];
    [items, waiters] = [[], []];
    return {
      batch,
      settled: (err?: unknown) => {
        for (const waiter of waiting) {
          if (err === undefined) waiter.resolve();
          else waiter.reject(err);
        }
      },
    };
  };

  const run = (): void => {
    const { batch, settled } = open();
    if (batch.length === 0) return;
    flush(batch).then(
      () => settled(),
      (err: unknown) => settled(err ?? new Error('the flush failed')),
    );
  };

  return {
    add(item) {
      return new Promise<void>((resolve, reject) => {
        items.push(item);
        waiters.push({ resolve, reject });
        if (items.length >= options.max) run();
        else if (timer === undefined) timer = options.delayMs > 0 ? setTimeout(run, options.delayMs) : setImmediate(run);
      });
    },
    pending: () => items.length,
    take() {
      if (items.length === 0) return undefined;
      const { batch, settled } = open();
      return { items: batch, settled };
    },
  };
}
