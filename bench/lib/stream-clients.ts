// The stream bench's clients, in a worker thread of the bench (bench/stream.ts) so that reading
// 100,000 frames a second neither delays nor shares an event loop with the events' commits. Each
// client is a raw TCP socket that sends one GET /v1/events/stream and then only scans the bytes it
// reads for `\nid: ` (every frame starts with its id line; JSON data never holds a raw newline):
// no HTTP parser, no text decoding of the body. Each read is timestamped once when it arrives
// (performance.timeOrigin + now: the clock the main thread uses), and every id in it gets that time.
import net from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';

export interface ClientsInput {
  host: string;
  port: number;
  key: string;
  streams: number;
}

/** Worker -> bench. */
export type ClientsMessage =
  | { kind: 'open'; streams: number }
  | { kind: 'progress'; frames: number }
  | { kind: 'arrivals'; ids: string[]; times: Float64Array[]; counts: number[] }
  | { kind: 'error'; message: string };

/** Bench -> worker. */
export type ClientsCommand = { kind: 'progress' } | { kind: 'finish' };

const NEEDLE = Buffer.from('\nid: ');
/** `\nid: ` and a 36-character event id. */
const ID_END = NEEDLE.length + 36;

const input = workerData as ClientsInput;
const port = parentPort!;
const arrivals = new Map<string, { times: Float64Array; count: number }>();
const sockets: net.Socket[] = [];
let frames = 0;

const record = (id: string, at: number): void => {
  let entry = arrivals.get(id);
  if (!entry) arrivals.set(id, (entry = { times: new Float64Array(input.streams), count: 0 }));
  if (entry.count < entry.times.length) entry.times[entry.count++] = at;
  frames++;
};

function openStream(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: input.host, port: input.port, noDelay: true });
    let headers = true;
    // Bytes of the previous read that may hold the start of a cut id line (at most ID_END - 1).
    let tail: Buffer | undefined;
    socket.on('connect', () =>
      socket.write(
        `GET /v1/events/stream HTTP/1.1\r\nHost: ${input.host}:${input.port}\r\nAuthorization: Bearer ${input.key}\r\nAccept: text/event-stream\r\n\r\n`,
      ),
    );
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      const at = performance.timeOrigin + performance.now();
      const buf = tail ? Buffer.concat([tail, chunk]) : chunk;
      tail = undefined;
      let from = 0;
      if (headers) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) {
          tail = buf;
          return;
        }
        if (!buf.toString('latin1', 0, 12).startsWith('HTTP/1.1 200')) {
          reject(new Error(`stream answered ${buf.toString('latin1', 0, buf.indexOf('\r\n'))}`));
          socket.destroy();
          return;
        }
        headers = false;
        // The body starts after the headers and the first chunk-size line, which ends in \n.
        from = end + 2;
        resolve();
      }
      let hit = buf.indexOf(NEEDLE, from);
      while (hit !== -1) {
        if (hit + ID_END > buf.length) {
          tail = buf.subarray(hit);
          return;
        }
        record(buf.toString('latin1', hit + NEEDLE.length, hit + ID_END), at);
        from = hit + ID_END;
        hit = buf.indexOf(NEEDLE, from);
      }
      // The read may end in the first bytes of the next id line.
      const keep = Math.max(from, buf.length - (NEEDLE.length - 1));
      if (keep < buf.length) tail = buf.subarray(keep);
    });
    sockets.push(socket);
  });
}

async function main(): Promise<void> {
  for (let i = 0; i < input.streams; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, input.streams - i) }, () => openStream()));
  }
  port.postMessage({ kind: 'open', streams: sockets.length } satisfies ClientsMessage);
}

port.on('message', (command: ClientsCommand) => {
  if (command.kind === 'progress') {
    port.postMessage({ kind: 'progress', frames } satisfies ClientsMessage);
    return;
  }
  for (const socket of sockets) socket.destroy();
  const ids = [...arrivals.keys()];
  const entries = ids.map((id) => arrivals.get(id)!);
  const times = entries.map((entry) => entry.times);
  port.postMessage(
    { kind: 'arrivals', ids, times, counts: entries.map((entry) => entry.count) } satisfies ClientsMessage,
    times.map((t) => t.buffer as ArrayBuffer),
  );
});

main().catch((err: unknown) => port.postMessage({ kind: 'error', message: err instanceof Error ? err.message : String(err) } satisfies ClientsMessage));
