// Reads a .cpuprofile (V8's sampling profiler, as node --cpu-prof writes it) and says which layer
// of the service the CPU went to. Each sample goes to the innermost frame that belongs to a layer
// (a package or a source file); Node internals and builtins count for the layer that called them.
// `npx tsx bench/profile.ts <file.cpuprofile> [requests in the window] [process CPU ms]` prints the summary.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export const LAYERS = [
  'auth',
  'rate limit',
  'request validation',
  'query building (Kysely)',
  'pg driver',
  'serialisation',
  'handlers',
  'express',
  'logging',
  'node http/net',
  'other packages',
  'garbage collection',
  'V8/native (unattributed)',
] as const;
export type Layer = (typeof LAYERS)[number];

const PACKAGE_LAYERS: Array<[RegExp, Layer]> = [
  [/\/src\/middleware\/authenticate\.ts|\/src\/keys\.ts/, 'auth'],
  [
    /\/node_modules\/(express-rate-limit|rate-limit-redis|ioredis|@ioredis|redis-errors|redis-parser|denque|cluster-key-slot|standard-as-callback)\/|\/src\/middleware\/rate-limit\.ts|\/src\/redis\.ts/,
    'rate limit',
  ],
  [
    /\/node_modules\/(express-openapi-validator|ajv|ajv-formats|ajv-draft-04|fast-uri|fast-deep-equal|json-schema-traverse|@apidevtools|lodash\.\w+)\//,
    'request validation',
  ],
  [/\/node_modules\/kysely\/|\/src\/db\//, 'query building (Kysely)'],
  [
    /\/node_modules\/(pg|pg-protocol|pg-pool|pg-types|pg-int8|pg-cloudflare|pg-connection-string|pgpass|postgres-array|postgres-bytea|postgres-date|postgres-interval|buffer-writer|packet-reader|obuf)\//,
    'pg driver',
  ],
  [
    /\/node_modules\/(pino|pino-std-serializers|sonic-boom|fast-redact|@pinojs\/redact|quick-format-unescaped|atomic-sleep|on-exit-leak-free|thread-stream|safe-stable-stringify|real-require|process-warning)\/|\/src\/middleware\/request-context\.ts|\/src\/logger\.ts/,
    'logging',
  ],
  [/\/src\/routes\/|\/src\/services\/|\/node_modules\/uuid\//, 'handlers'],
  [
    /\/node_modules\/(express|router|body-parser|finalhandler|on-finished|parseurl|qs|send|type-is|mime-types|mime-db|accepts|negotiator|depd|ee-first|vary|encodeurl|escape-html|etag|fresh|range-parser|proxy-addr|forwarded|ipaddr\.js|statuses|http-errors|setprototypeof|cookie|cookie-signature|debug|ms|raw-body|iconv-lite|bytes|unpipe|merge-descriptors|content-disposition|serve-static|safe-buffer|inherits|toidentifier|once|wrappy|is-promise|side-channel\w*|call-bind\w*|get-intrinsic|es-\w+|has-symbols|object-inspect|function-bind|hasown|gopd|dunder-proto|math-intrinsics|get-proto)\/|\/src\/middleware\/|\/src\/app\.ts|\/src\/errors\.ts|\/src\/contract\.ts/,
    'express',
  ],
];

/** Natives whose time is serialisation of the response (unless the logger called them). */
const SERIALISING_NATIVES = new Set(['stringify', 'toISOString', 'toJSON', 'JSONSerialize', 'SerializeJSONObject']);
/** Node's HTTP response and socket code: under an Express frame it is the response being written. */
const HTTP_IO = /^node:(_http_outgoing|_http_common|net|internal\/stream_base_commons|internal\/streams\/writable)$/;
/** Row-to-API mapping functions of src/db (`agentRowToAgent`, ...): serialisation too. */
const ROW_MAPPER = /RowTo[A-Z]/;

/** Packages several layers call (the router and the validator both match paths): their caller owns them. */
const SHARED = /\/node_modules\/(path-to-regexp|qs|content-type|media-typer|type-is|mime-types|mime-db|debug|ms|depd)\//;

function packageLayer(frame: CallFrame): Layer | undefined {
  const { url, functionName } = frame;
  if (!url) return /^validate\d*$/.test(functionName) ? 'request validation' : undefined;
  if (url.startsWith('node:') || SHARED.test(url)) return undefined;
  for (const [pattern, layer] of PACKAGE_LAYERS) if (pattern.test(url)) return layer;
  if (url.includes('/node_modules/')) return 'other packages';
  if (url.includes('/src/')) return 'handlers';
  return undefined;
}

/** Where a frame lives: `node_modules/<package>`, `src/<file>`, `node:<module>` or `(native) <name>`. */
function place(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName || '(anonymous)'}`;
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return `node_modules/${pkg[1]}`;
  const src = /\/(src\/.*|bench\/.*)$/.exec(url);
  if (src) return src[1]!;
  return url.replace(/^file:\/\//, '');
}

export interface Measured {
  /** Requests served in the profiled window. */
  requests: number;
  /** CPU ms the process used in the window (/proc: all its threads), to turn shares into µs. */
  cpuMs?: number | undefined;
}

export interface ProfileSummary {
  windowMs: number;
  /** Sampled time outside (idle): wall time, so it grows when the machine is busy. */
  busyMs: number;
  idleMs: number;
  requests?: number | undefined;
  cpuMs?: number | undefined;
  /** CPU µs per request (from cpuMs when given, else from the sampled busy time). */
  usPerRequest?: number | undefined;
  layers: Array<{ layer: Layer; ms: number; share: number; usPerRequest?: number | undefined }>;
  places: Array<{ place: string; ms: number; share: number }>;
}

export function summariseProfile(profile: CpuProfile, measured?: Measured): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const layerOf = new Map<number, Layer | 'idle'>();
  const classify = (id: number): Layer | 'idle' => {
    const cached = layerOf.get(id);
    if (cached) return cached;
    const leaf = byId.get(id)!.callFrame.functionName;
    let layer: Layer | 'idle' | undefined;
    if (leaf === '(idle)') layer = 'idle';
    else if (leaf === '(garbage collector)') layer = 'garbage collection';
    else if (leaf === '(program)' || leaf === '(root)') layer = 'V8/native (unattributed)';
    else {
      let serialising = false;
      let sawNode = false;
      let sawHttpIo = false;
      for (let at: number | undefined = id; at !== undefined && layer === undefined; at = parent.get(at)) {
        const frame = byId.get(at)!.callFrame;
        if (!frame.url && SERIALISING_NATIVES.has(frame.functionName)) serialising = true;
        if (frame.url.startsWith('node:')) sawNode = true;
        if (HTTP_IO.test(frame.url)) sawHttpIo = true;
        const owner = packageLayer(frame);
        if (!owner) continue;
        if (ROW_MAPPER.test(frame.functionName)) layer = 'serialisation';
        else if (serialising && owner !== 'logging') layer = 'serialisation';
        // res.send() writing the response: the HTTP server's work, not Express'.
        else if (sawHttpIo && owner === 'express') layer = 'node http/net';
        else layer = owner;
      }
      layer ??= serialising ? 'serialisation' : sawNode ? 'node http/net' : 'V8/native (unattributed)';
    }
    layerOf.set(id, layer);
    return layer;
  };

  const layerUs = new Map<Layer | 'idle', number>();
  const placeUs = new Map<string, number>();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    // A sample stands for the time until the next one.
    const us = Math.max(0, timeDeltas[i + 1] ?? timeDeltas[i] ?? 0);
    const id = samples[i]!;
    const layer = classify(id);
    layerUs.set(layer, (layerUs.get(layer) ?? 0) + us);
    if (layer !== 'idle') {
      const where = place(byId.get(id)!.callFrame);
      placeUs.set(where, (placeUs.get(where) ?? 0) + us);
    }
  }
  const idleMs = (layerUs.get('idle') ?? 0) / 1000;
  const busyMs = [...layerUs].filter(([layer]) => layer !== 'idle').reduce((sum, [, us]) => sum + us, 0) / 1000;
  const requests = measured?.requests;
  const usPerRequest = requests ? ((measured?.cpuMs ?? busyMs) * 1000) / requests : undefined;
  return {
    windowMs: (profile.endTime - profile.startTime) / 1000,
    busyMs,
    idleMs,
    requests,
    cpuMs: measured?.cpuMs,
    usPerRequest,
    layers: LAYERS.map((layer) => {
      const ms = (layerUs.get(layer) ?? 0) / 1000;
      const share = busyMs ? ms / busyMs : 0;
      return { layer, ms, share, usPerRequest: usPerRequest === undefined ? undefined : share * usPerRequest };
    }).sort((a, b) => b.ms - a.ms),
    places: [...placeUs]
      .map(([where, us]) => ({ place: where, ms: us / 1000, share: busyMs ? us / 1000 / busyMs : 0 }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 25),
  };
}

const pct = (share: number): string => `${(share * 100).toFixed(1)}%`;

/** The summary as Markdown: layers, then the busiest places (self time). */
export function profileMarkdown(summary: ProfileSummary, title: string): string {
  const lines = [
    `#### ${title}`,
    '',
    `Window ${(summary.windowMs / 1000).toFixed(1)} s; main thread sampled busy ${(summary.busyMs / 1000).toFixed(2)} s` +
      (summary.cpuMs !== undefined ? `, process CPU ${(summary.cpuMs / 1000).toFixed(2)} s` : '') +
      (summary.requests ? `; ${summary.requests} requests, ${summary.usPerRequest?.toFixed(0)} µs of CPU per request` : '') +
      '. Shares are of the sampled busy time; µs/request = share x CPU per request.',
    '',
    '| layer | sampled ms | share | µs/request |',
    '|---|---:|---:|---:|',
    ...summary.layers.filter((l) => l.ms > 0).map((l) => `| ${l.layer} | ${l.ms.toFixed(0)} | ${pct(l.share)} | ${l.usPerRequest?.toFixed(1) ?? ''} |`),
    '',
    '<details><summary>Self time by place (top 25)</summary>',
    '',
    '| place | sampled ms | share |',
    '|---|---:|---:|',
    ...summary.places.map((p) => `| \`${p.place}\` | ${p.ms.toFixed(0)} | ${pct(p.share)} |`),
    '',
    '</details>',
    '',
  ];
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) {
  const [file, requests, cpuMs] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: npx tsx bench/profile.ts <file.cpuprofile> [requests] [cpu ms]\n');
    process.exit(2);
  }
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const measured = requests ? { requests: Number(requests), cpuMs: cpuMs ? Number(cpuMs) : undefined } : undefined;
  process.stdout.write(profileMarkdown(summariseProfile(profile, measured), file));
}
