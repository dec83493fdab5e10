// The event streams each API key holds open on this instance: at most `perKey` at once (a stream
// token's stream counts on its key), so one key's streams cannot take the process's connections.
// The count of every open stream is watched by the HTTP server, which keeps streams off the
// connection budget of requests.

export interface StreamSlots {
  /** STREAMS_PER_KEY. */
  readonly perKey: number;
  /** A slot for one more stream of the key, with its release (idempotent); undefined when the key has them all. */
  take(keyId: string): (() => void) | undefined;
  /** Streams open now, every key together. */
  open(): number;
  /** Calls `listener` with open() whenever it changes. */
  watch(listener: (open: number) => void): void;
}

export function createStreamSlots(perKey: number): StreamSlots {
  const byKey = new Map<string, number>();
  const listeners: Array<(open: number) => void> = [];
  let open = 0;
  const changed = (by: number): void => {
    open += by;
    for (const listener of listeners) listener(open);
  };
  return {
    perKey,
    take(keyId) {
      const held = byKey.get(keyId) ?? 0;
      if (held >= perKey) return undefined;
      byKey.set(keyId, held + 1);
      changed(1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = byKey.get(keyId)! - 1;
        if (left === 0) byKey.delete(keyId);
        else byKey.set(keyId, left);
        changed(-1);
      };
    },
    open: () => open,
    watch(listener) {
      listeners.push(listener);
    },
  };
}
