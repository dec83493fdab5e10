// One autocannon run in a process of its own (so its CPU is the load generator's, not the bench's):
// `node --import tsx bench/autocannon-run.ts <LoadSpec JSON file>` prints `BENCH_AC <LoadResult JSON>`.
import autocannon from 'autocannon';
import { readLoadSpec, type LoadResult } from './lib/load.js';

const spec = readLoadSpec(process.argv[2]);
const variants = spec.variants ?? [];
let next = 0;

const result = await autocannon({
  url: spec.url,
  method: spec.method ?? 'GET',
  headers: spec.headers ?? {},
  connections: spec.connections,
  duration: spec.durationS,
  ...(spec.rate !== undefined && { overallRate: spec.rate }),
  ...(variants.length > 0 && {
    requests: [
      {
        setupRequest: (request: Record<string, unknown>) => {
          const variant = variants[next++ % variants.length]!;
          return {
            ...request,
            headers: { ...(request.headers as Record<string, string>), ...variant.headers },
            ...(variant.body !== undefined && { body: variant.body }),
            ...(variant.path !== undefined && { path: variant.path }),
          };
        },
      },
    ],
  }),
});

const completed = result['2xx'] + result.non2xx;
const out: Omit<LoadResult, 'loadgenCpuMs'> = {
  tool: 'autocannon',
  connections: spec.connections,
  ...(spec.rate !== undefined && { rate: spec.rate }),
  durationS: result.duration,
  requests: completed,
  rps: completed / result.duration,
  p50Ms: result.latency.p50,
  p90Ms: result.latency.p90,
  p99Ms: result.latency.p99,
  maxMs: result.latency.max,
  non2xx: result.non2xx,
  socketErrors: result.errors + result.timeouts,
};
process.stdout.write(`BENCH_AC ${JSON.stringify(out)}\n`);
