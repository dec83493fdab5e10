// One run at a fixed request rate, open loop, in a process of its own (so its CPU is the load
// generator's): `node --import tsx bench/paced-run.ts <LoadSpec JSON file>` prints
// `BENCH_PACED <LoadResult JSON>`.
//
// Request i is due at start + i / rate, evenly spaced, whether or not earlier ones have answered;
// at most `connections` are in flight (keep-alive sockets), the rest wait for a socket. Latency is
// measured from when a request was due, not from when it could be sent, so a stall shows in the
// percentiles instead of lowering the rate (coordinated omission). The first second runs at the
// same rate unrecorded: the generator's own start (sockets opening, its code still cold) is not
// the server's latency. autocannon's `overallRate` is
// not this: each connection sends its share of a second back to back, as fast as the server
// answers, then idles until the next second, so its "fixed rate" is saturated bursts.
import http from 'node:http';
import { readLoadSpec, type LoadResult } from './lib/load.js';

const spec = readLoadSpec(process.argv[2]);
const rate = spec.rate!;
const url = new URL(spec.url);
const variants = spec.variants ?? [];
const agent = new http.Agent({ keepAlive: true, maxSockets: spec.connections });
const LEAD_IN_S = 1;
const lead = Math.round(rate * LEAD_IN_S);
const total = lead + Math.round(rate * spec.durationS);
const latencies = new Float64Array(total);
let completed = 0;
let non2xx = 0;
let socketErrors = 0;

function send(i: number, due: number): Promise<void> {
  const variant = variants.length > 0 ? variants[i % variants.length]! : {};
  const body = variant.body;
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      if (ok && i >= lead) latencies[completed++] = performance.now() - due;
      resolve();
    };
    const req = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: spec.method ?? 'GET',
        headers: {
          ...spec.headers,
          ...variant.headers,
          ...(body !== undefined && { 'content-length': Buffer.byteLength(body) }),
        },
        timeout: 10_000,
      },
      (res) => {
        if (res.statusCode === undefined || res.statusCode >= 400) non2xx++;
        res.resume();
        res.on('end', () => done(true));
        res.on('error', () => {
          socketErrors++;
          done(false);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => {
      socketErrors++;
      done(false);
    });
    req.end(body);
  });
}

const start = performance.now();
const intervalMs = 1000 / rate;
const inFlight: Array<Promise<void>> = [];
let sent = 0;
await new Promise<void>((resolve) => {
  const tick = (): void => {
    const now = performance.now();
    // Every request due by now goes out now; the timer wakes for the next one.
    while (sent < total && start + sent * intervalMs <= now) {
      inFlight.push(send(sent, start + sent * intervalMs));
      sent++;
    }
    if (sent >= total) return resolve();
    setTimeout(tick, Math.max(0, start + sent * intervalMs - performance.now()));
  };
  tick();
});
await Promise.all(inFlight);
const durationS = (performance.now() - start) / 1000 - LEAD_IN_S;
agent.destroy();

const sorted = latencies.subarray(0, completed).sort();
const at = (q: number): number => (completed === 0 ? 0 : sorted[Math.min(completed - 1, Math.ceil(q * completed) - 1)]!);
const out: Omit<LoadResult, 'loadgenCpuMs'> = {
  tool: 'paced',
  connections: spec.connections,
  rate,
  durationS,
  requests: completed,
  rps: completed / durationS,
  p50Ms: at(0.5),
  p90Ms: at(0.9),
  p99Ms: at(0.99),
  maxMs: completed === 0 ? 0 : sorted[completed - 1]!,
  non2xx,
  socketErrors,
};
process.stdout.write(`BENCH_PACED ${JSON.stringify(out)}\n`);
