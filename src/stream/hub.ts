// The instance's live event streams: one LISTEN on `events_added` (sent by the event log's `stream`
// consumer, announce.ts, so any instance's commits wake every instance), one read of the log per
// wake-up for the workspaces streamed here (wake-ups during a read make one more read), each event
// formatted once, and each stream given one write a read: its events' frames joined once per type
// filter and shared by every stream with that filter. One timer for all streams' keep-alives, one for
// their keys' revocation checks, and the leases that make writers NOTIFY only for workspaces
// streamed somewhere (leases.ts).
import type { Db } from '../db/database.js';
import { eventRowToEvent } from '../events/record.js';
import { createJobListener, type JobListener } from '../jobs/listen.js';
import type { Logger } from '../logger.js';
import { createStreamSlots, type StreamSlots } from './key-slots.js';
import { createLeases } from './leases.js';
import { EVENTS_CHANNEL } from './announce.js';
import { activeKeyIds } from '../db/api-keys.js';
import { committedSince, currentHorizon, type LoggedEvent } from './log.js';

export { EVENTS_CHANNEL };
/** How soon to look again while an announced event waits for an older transaction to end. */
const HELD_BACK_POLL_MS = 20;

export interface StreamOptions {
  /** Between `: keepalive` comments. */
  keepAliveMs: number;
  /** Between checks that the streams' keys are not revoked. */
  keyCheckMs: number;
  /** Bytes a stream may have waiting for a slow client before it is closed. */
  bufferLimitBytes: number;
  /** A read of the log even without a notification (notifications lost while LISTEN reconnects). */
  fallbackPollMs: number;
  /** How long a lease on a workspace's notifications lasts unless renewed (every third of it). */
  leaseMs: number;
  /**
   * At least this long between the starts of two reads of the log: events committed meanwhile go
   * out together, in one write a stream (a write costs a stream about the same for one event as for ten).
   */
  readIntervalMs: number;
}

export const defaultStreamOptions: StreamOptions = {
  keepAliveMs: 15_000,
  keyCheckMs: 30_000,
  bufferLimitBytes: 1024 * 1024,
  fallbackPollMs: 1_000,
  leaseMs: 30_000,
  readIntervalMs: 25,
};

/** An event ready to send: its place in the order and its SSE frame. */
export interface LiveEvent {
  xid: bigint;
  id: string;
  type: string;
  frame: Buffer;
}

/** The event types a stream asked for, with a key naming that choice. */
export interface TypeFilter {
  key: string;
  types: ReadonlySet<string>;
}

/** The filter of `types`; undefined (every event) when none are named. */
export function typeFilter(types: readonly string[] | undefined): TypeFilter | undefined {
  if (!types) return undefined;
  const set = new Set(types);
  return { key: [...set].sort().join(','), types: set };
}

/** One read's events of one workspace, in order. */
export interface LiveBatch {
  readonly events: readonly LiveEvent[];
  /** The frames of the events `filter` keeps (all without one) in one buffer: built once per filter, shared by the streams. */
  frames(filter: TypeFilter | undefined): Buffer;
}

export function liveBatch(events: readonly LiveEvent[]): LiveBatch {
  const joined = new Map<string, Buffer>();
  return {
    events,
    frames(filter) {
      const key = filter ? filter.key : '*';
      let frames = joined.get(key);
      if (!frames) {
        const kept = filter ? events.filter((event) => filter.types.has(event.type)) : events;
        frames = kept.length === 1 ? kept[0]!.frame : Buffer.concat(kept.map((event) => event.frame));
        joined.set(key, frames);
      }
      return frames;
    },
  };
}

export interface Subscriber {
  workspaceId: string;
  keyId: string;
  deliver(batch: LiveBatch): void;
  /** Says the stream is alive unless bytes still wait for the client. */
  keepAlive(): void;
  /** Ends the stream with `reason` as a comment. */
  close(reason: string): void;
}

export interface EventStreams {
  readonly db: Db;
  readonly options: StreamOptions;
  /** The streams each key holds open here (STREAMS_PER_KEY), taken before a stream starts. */
  readonly slots: StreamSlots;
  /**
   * Adds a stream. Every event of its workspace written at or above the returned horizon is handed
   * to `deliver`, in order; the ones below it are in the log (eventsAfter ... before the horizon).
   */
  subscribe(subscriber: Subscriber): Promise<{ horizon: bigint; unsubscribe(): void }>;
  /** Streams open on this instance. */
  size(): number;
  /** Closes every stream (saying the server is stopping) and stops listening. */
  close(): Promise<void>;
}

export const SHUTDOWN_REASON = 'the server is shutting down; reconnect with Last-Event-ID';
export const REVOKED_REASON = 'the API key was revoked';

/** What subscribe throws once the instance's streams are closed: the stream opening now ends with SHUTDOWN_REASON. */
export class StreamsClosedError extends Error {
  constructor() {
    super('event streams are closed');
  }
}

export function formatEvent(event: LoggedEvent): LiveEvent {
  const json = JSON.stringify(eventRowToEvent(event));
  return { xid: event.xid, id: event.id, type: event.type, frame: Buffer.from(`id: ${event.id}\nevent: ${event.type}\ndata: ${json}\n\n`) };
}

export function createEventStreams(deps: {
  db: Db;
  databaseUrl: string | undefined;
  logger: Logger;
  /** STREAMS_PER_KEY. */
  streamsPerKey: number;
  options?: Partial<StreamOptions> | undefined;
}): EventStreams {
  const { db, logger } = deps;
  const options: StreamOptions = { ...defaultStreamOptions, ...deps.options };
  const byWorkspace = new Map<string, Set<Subscriber>>();
  let count = 0;
  /** Every event below it was handed out; undefined while nothing is streamed. */
  let horizon: bigint | undefined;
  let starting: Promise<void> | undefined;
  let inflight: { workspaces: Set<string>; done: Promise<void> } | undefined;
  let again = false;
  /** The newest transaction announced: while the horizon is not past it, events are held back. */
  let announced = 0n;
  let followUp: NodeJS.Timeout | undefined;
  let lastRead = -Infinity;
  let deferred: NodeJS.Timeout | undefined;
  let closed = false;
  let failing = false;

  const poll = (): Promise<void> => {
    if (inflight) {
      again = true;
      return inflight.done;
    }
    if (horizon === undefined || closed) return Promise.resolve();
    const wait = lastRead + options.readIntervalMs - performance.now();
    if (wait > 0) {
      deferred ??= setTimeout(() => {
        deferred = undefined;
        void poll();
      }, wait);
      return Promise.resolve();
    }
    lastRead = performance.now();
    const from = horizon;
    const workspaces = new Set(byWorkspace.keys());
    const done = (async () => {
      try {
        const batch = await committedSince(db, [...workspaces], from);
        if (failing) logger.info('event stream reads are back');
        failing = false;
        if (horizon !== from) return;
        const byEventWorkspace = new Map<string, LiveEvent[]>();
        for (const row of batch.events) {
          let events = byEventWorkspace.get(row.workspace_id);
          if (!events) byEventWorkspace.set(row.workspace_id, (events = []));
          events.push(formatEvent(row));
        }
        for (const [workspaceId, events] of byEventWorkspace) {
          const streams = byWorkspace.get(workspaceId);
          if (!streams) continue;
          const live = liveBatch(events);
          for (const stream of streams) stream.deliver(live);
        }
        horizon = batch.upTo > from ? batch.upTo : from;
      } catch (err) {
        if (!failing) logger.warn({ err: (err as Error).message }, 'event stream cannot read the log; retrying');
        failing = true;
      } finally {
        inflight = undefined;
      }
      if (again) {
        again = false;
        void poll();
      } else if (horizon !== undefined && announced >= horizon && !followUp) {
        // An announced transaction is still behind an older running one: look again shortly.
        followUp = setTimeout(() => {
          followUp = undefined;
          void poll();
        }, HELD_BACK_POLL_MS);
        followUp.unref();
      }
    })();
    inflight = { workspaces, done };
    return done;
  };

  /** Transactions below `xid` may have written events unannounced: look until the horizon passes them. */
  const lookUpTo = (xid: bigint): void => {
    if (xid - 1n > announced) announced = xid - 1n;
    if (count > 0) void poll();
  };

  const leases = createLeases(db, logger, options.leaseMs, () => [...byWorkspace.keys()], lookUpTo);

  let listener: JobListener | undefined;
  try {
    listener = createJobListener({ db, databaseUrl: deps.databaseUrl, logger, channel: EVENTS_CHANNEL });
    listener.subscribe((payload) => {
      if (/^\d+$/.test(payload)) {
        const xid = BigInt(payload);
        if (xid > announced) announced = xid;
      }
      if (count > 0) void poll();
    });
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'event streams are read every second: no LISTEN connection');
  }

  const fallback = setInterval(() => {
    if (count > 0) void poll();
  }, options.fallbackPollMs);
  fallback.unref();

  const everyStream = (): Subscriber[] => [...byWorkspace.values()].flatMap((set) => [...set]);

  const keepAlive = setInterval(() => {
    for (const set of byWorkspace.values()) for (const stream of set) stream.keepAlive();
  }, options.keepAliveMs);
  keepAlive.unref();

  const keyCheck = setInterval(() => {
    if (count === 0) return;
    const all = everyStream();
    activeKeyIds(db, [...new Set(all.map((s) => s.keyId))]).then(
      (active) => {
        for (const stream of all) if (!active.has(stream.keyId)) stream.close(REVOKED_REASON);
      },
      (err: Error) => logger.warn({ err: err.message }, 'event stream cannot check keys; retrying'),
    );
  }, options.keyCheckMs);
  keyCheck.unref();

  const renewal = setInterval(() => leases.renew(), Math.max(1, Math.floor(options.leaseMs / 3)));
  renewal.unref();

  const start = async (): Promise<void> => {
    try {
      const now = await currentHorizon(db);
      if (horizon === undefined) horizon = now;
    } finally {
      starting = undefined;
    }
  };

  return {
    db,
    options,
    slots: createStreamSlots(deps.streamsPerKey),
    size: () => count,
    async subscribe(subscriber) {
      for (;;) {
        if (closed) throw new StreamsClosedError();
        if (horizon === undefined) await (starting ??= start());
        else if (inflight && !inflight.workspaces.has(subscriber.workspaceId)) await inflight.done;
        else break;
      }
      let set = byWorkspace.get(subscriber.workspaceId);
      if (!set) {
        byWorkspace.set(subscriber.workspaceId, (set = new Set()));
        leases.take(subscriber.workspaceId);
      }
      set.add(subscriber);
      count++;
      const joined = horizon;
      let subscribed = true;
      return {
        horizon: joined,
        unsubscribe() {
          if (!subscribed) return;
          subscribed = false;
          set.delete(subscriber);
          if (set.size === 0 && byWorkspace.get(subscriber.workspaceId) === set) byWorkspace.delete(subscriber.workspaceId);
          if (--count === 0) horizon = undefined;
        },
      };
    },
    async close() {
      closed = true;
      clearInterval(fallback);
      clearInterval(keepAlive);
      clearInterval(keyCheck);
      clearInterval(renewal);
      if (followUp) clearTimeout(followUp);
      if (deferred) clearTimeout(deferred);
      for (const stream of everyStream()) stream.close(SHUTDOWN_REASON);
      await Promise.all([listener?.close(), leases.release()]);
    },
  };
}
