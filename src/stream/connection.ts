// One client's stream: headers at once, the replay after Last-Event-ID (events arriving meanwhile
// wait, then follow), live events (one write a read of the log, of frames the hub joined once for
// every stream with the same types), keep-alives (the hub's one timer), and the comment that says
// why the server closes it. A stream holds at most `bufferLimitBytes` for a client that does not
// read; past that it is closed.
import type { Response } from 'express';
import type { Logger } from '../logger.js';
import { formatEvent, SHUTDOWN_REASON, StreamsClosedError, typeFilter, type EventStreams, type LiveEvent } from './hub.js';
import { eventsAfter, isAfter, positionOf, type Position } from './log.js';

export interface StreamRequest {
  workspaceId: string;
  keyId: string;
  /** Only these event types; all when undefined. */
  types: readonly string[] | undefined;
  lastEventId: string | undefined;
}

const REPLAY_PAGE = 200;
const RESET_FRAME = 'event: reset\ndata: {}\n\n';
const KEEPALIVE = ': keepalive\n\n';
/** How long a closed stream's last bytes may wait for a client that does not read them. */
const LINGER_MS = 30_000;

export async function serveStream(streams: EventStreams, res: Response, stream: StreamRequest, log: Logger): Promise<void> {
  const { db, options } = streams;
  const filter = typeFilter(stream.types);
  const after: Position | 'reset' | undefined =
    stream.lastEventId === undefined ? undefined : ((await positionOf(db, stream.workspaceId, stream.lastEventId)) ?? 'reset');

  let open = true;
  let replaying = after !== undefined && after !== 'reset';
  const waiting: LiveEvent[] = [];
  let waitingBytes = 0;
  /** Live events may not yet be past Last-Event-ID (it named an event above the hub's horizon): each is checked. */
  let checkEach = replaying;
  let unsubscribe = (): void => {};

  const close = (reason: string): void => {
    if (!open) return;
    open = false;
    unsubscribe();
    waiting.length = 0;
    res.end(`: ${reason}\n\n`);
    const linger = setTimeout(() => res.destroy(), LINGER_MS);
    linger.unref();
    res.once('close', () => clearTimeout(linger));
  };
  const tooSlow = (): void => close(`closed: the client reads too slowly (over ${options.bufferLimitBytes} bytes waiting); reconnect with Last-Event-ID`);
  /** Writes unless the client is too far behind; false when the stream was closed. */
  const send = (chunk: Buffer | string): boolean => {
    if (!open) return false;
    // One write always goes out when nothing waits: a read of the log larger than the limit is not a slow client.
    if (res.writableLength > 0 && res.writableLength + chunk.length > options.bufferLimitBytes) {
      tooSlow();
      return false;
    }
    res.write(chunk);
    return true;
  };
  const wanted = (event: LiveEvent): boolean =>
    (!filter || filter.types.has(event.type)) && (after === undefined || after === 'reset' || isAfter(event, after));

  res.once('close', () => {
    open = false;
    unsubscribe();
  });

  // The headers are set now (an event delivered as soon as the subscription starts is written after
  // them) and sent once the subscription has fixed where the live events start: a client told the
  // stream is open (EventSource's `open`) gets every event that commits from then on.
  setStreamHeaders(res);

  const subscription = await streams
    .subscribe({
      workspaceId: stream.workspaceId,
      keyId: stream.keyId,
      deliver(batch) {
        if (!open) return;
        if (replaying) {
          for (const event of batch.events) {
            if (!wanted(event)) continue;
            waiting.push(event);
            waitingBytes += event.frame.length;
          }
          if (waiting.length > 1 && waitingBytes + res.writableLength > options.bufferLimitBytes) tooSlow();
          return;
        }
        const frames = checkEach ? Buffer.concat(batch.events.filter(wanted).map((event) => event.frame)) : batch.frames(filter);
        if (frames.length > 0) send(frames);
      },
      keepAlive() {
        if (res.writableLength === 0) send(KEEPALIVE);
      },
      close,
    })
    .catch((err: unknown) => {
      // The answer is a stream already: say it in the stream (the instance is stopping, or the database is down).
      if (err instanceof StreamsClosedError) {
        close(SHUTDOWN_REASON);
        return undefined;
      }
      log.warn({ err: (err as Error).message }, 'event stream could not start');
      close('closed: the server cannot stream now; reconnect with Last-Event-ID');
      return undefined;
    });
  if (!subscription) return;
  if (!open) {
    // The client left (or the hub closed the stream) while the subscription started.
    subscription.unsubscribe();
    return;
  }
  unsubscribe = () => subscription.unsubscribe();
  if (!res.headersSent) res.flushHeaders();

  if (after === 'reset') send(RESET_FRAME);
  if (after === undefined || after === 'reset') return;
  try {
    let cursor = after;
    for (;;) {
      const page = await eventsAfter(db, stream.workspaceId, cursor, subscription.horizon, stream.types, REPLAY_PAGE);
      for (const row of page) {
        if (!open) return;
        if (!res.write(formatEvent(row).frame)) await drained(res);
      }
      if (page.length < REPLAY_PAGE || !open) break;
      cursor = page[page.length - 1]!;
    }
    // Live events come from the horizon on; only when Last-Event-ID is above it may some not be after it.
    checkEach = after.xid >= subscription.horizon;
    replaying = false;
    const held = waiting.splice(0);
    if (held.length > 0) send(Buffer.concat(held.map((event) => event.frame)));
  } catch (err) {
    log.error({ err }, 'event stream replay failed');
    close('closed: the log could not be read; reconnect with Last-Event-ID');
  }
}

/** HEAD /events/stream: the stream's headers, and no stream. */
export function answerStreamHead(res: Response): void {
  setStreamHeaders(res);
  res.end();
}

function setStreamHeaders(res: Response): void {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('X-Accel-Buffering', 'no');
  // The connection is the stream's: when the server ends the stream, the client reconnects anew.
  // So the body ends with the connection, and needs no chunked framing (three buffers more a write).
  res.setHeader('Connection', 'close');
  res.removeHeader('Transfer-Encoding');
}

/** Resolves when the response can take more, or is gone. */
function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });
}
