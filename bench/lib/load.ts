// Load generation: wrk (C, one thread, little CPU) for closed-loop throughput runs, with autocannon
// as the fallback when wrk is not installed; `bench/paced-run.ts` (open loop, evenly spaced) for
// runs at a fixed request rate, which wrk cannot hold and autocannon only holds in bursts.
// Each run goes through `sh` so the generator's own CPU time can be read from the shell's cutime.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseProcStat } from './cpu.js';

export interface Variant {
  headers?: Record<string, string>;
  body?: string;
  /** The path (and query) of this variant, when it differs from the spec's URL (e.g. one thread each). */
  path?: string;
}

export interface LoadSpec {
  url: string;
  method?: 'GET' | 'POST' | 'PATCH';
  headers?: Record<string, string>;
  /** Per-request variations, cycled in order (e.g. bodies over many contacts, or several keys). */
  variants?: Variant[];
  connections: number;
  durationS: number;
  /** A fixed overall request rate (req/s); always the paced generator. */
  rate?: number;
}

export interface LoadResult {
  tool: 'wrk' | 'autocannon' | 'paced';
  connections: number;
  rate?: number;
  durationS: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Responses other than 2xx/3xx. */
  non2xx: number;
  /** Connection errors and timeouts. */
  socketErrors: number;
  /** CPU time of the load generator itself. */
  loadgenCpuMs: number;
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const AUTOCANNON_RUNNER = path.join(HERE, '..', 'autocannon-run.ts');
const PACED_RUNNER = path.join(HERE, '..', 'paced-run.ts');

let wrkPath: string | null | undefined;

/** The wrk binary, or null when it is not installed. */
export function findWrk(): string | null {
  if (wrkPath === undefined) {
    try {
      wrkPath = execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).trim() || null;
    } catch {
      wrkPath = null;
    }
  }
  return wrkPath;
}

/** Load generators running now (each the leader of its own process group: sh and wrk/node). */
const running = new Set<ChildProcess>();

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Stops the load generators still running (the bench is ending early). */
export function stopLoads(): void {
  for (const child of running) killGroup(child);
}

const SH_WRAPPER = '"$@"; rc=$?; read -r s < /proc/$$/stat; echo "BENCH_SHSTAT $s" >&2; exit $rc';

/** Runs a command under sh; resolves with its stdout and the CPU ms it used (with its children). */
function runMeasured(command: string, args: string[], timeoutMs: number): Promise<{ stdout: string; cpuMs: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', SH_WRAPPER, 'sh', command, ...args], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => killGroup(child), timeoutMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      running.delete(child);
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`${command} exited with ${code}:\n${stderr.slice(-2_000)}${stdout.slice(-2_000)}`));
      const line = /BENCH_SHSTAT (.*)/.exec(stderr)?.[1];
      const stat = line ? parseProcStat(line) : undefined;
      resolve({ stdout, cpuMs: stat?.childrenMs ?? 0 });
    });
  });
}

/** A Lua long string: safe for JSON bodies and header values. */
const lua = (text: string): string => `[==[${text}]==]`;

function wrkScript(spec: LoadSpec): string {
  const lines: string[] = [];
  if (spec.variants?.length || (spec.method ?? 'GET') !== 'GET') {
    const variants = spec.variants?.length ? spec.variants : [{}];
    const url = new URL(spec.url);
    lines.push('local variants = {');
    for (const v of variants) {
      const headers = { ...spec.headers, ...v.headers };
      const entries = Object.entries(headers).map(([k, value]) => `[ ${lua(k)} ] = ${lua(value)}`);
      const target = v.path ?? url.pathname + url.search;
      lines.push(`  { path = ${lua(target)}, headers = { ${entries.join(', ')} }, body = ${v.body === undefined ? 'nil' : lua(v.body)} },`);
    }
    lines.push('}');
    lines.push('local requests = {}');
    lines.push('local counter = 0');
    lines.push('init = function(args)');
    lines.push('  for i, v in ipairs(variants) do');
    lines.push(`    requests[i] = wrk.format(${lua(spec.method ?? 'GET')}, v.path, v.headers, v.body)`);
    lines.push('  end');
    lines.push('end');
    lines.push('request = function()');
    lines.push('  counter = counter % #requests + 1');
    lines.push('  return requests[counter]');
    lines.push('end');
  }
  // Latencies in microseconds; one JSON line the bench reads back.
  lines.push('done = function(summary, latency, requests)');
  lines.push('  local e = summary.errors');
  lines.push(
    `  io.write(string.format('BENCH_WRK {"requests":%.0f,"duration_us":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f,"p50":%.0f,"p90":%.0f,"p99":%.0f,"max":%.0f}\\n',`,
  );
  lines.push('    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,');
  lines.push('    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))');
  lines.push('end');
  return lines.join('\n') + '\n';
}

async function runWrk(wrk: string, spec: LoadSpec, workDir: string): Promise<LoadResult> {
  const script = path.join(workDir, `wrk-${process.hrtime.bigint()}.lua`);
  fs.writeFileSync(script, wrkScript(spec));
  const args = ['-t', '1', '-c', String(spec.connections), '-d', `${spec.durationS}s`, '--timeout', '5s', '-s', script];
  if (!spec.variants?.length && (spec.method ?? 'GET') === 'GET') {
    for (const [name, value] of Object.entries(spec.headers ?? {})) args.push('-H', `${name}: ${value}`);
  }
  args.push(spec.url);
  try {
    const { stdout, cpuMs } = await runMeasured(wrk, args, (spec.durationS + 30) * 1000);
    const json = /BENCH_WRK (.*)/.exec(stdout)?.[1];
    if (!json) throw new Error(`wrk printed no result:\n${stdout}`);
    const r = JSON.parse(json) as Record<string, number>;
    const durationS = r.duration_us! / 1e6;
    return {
      tool: 'wrk',
      connections: spec.connections,
      durationS,
      requests: r.requests!,
      rps: r.requests! / durationS,
      p50Ms: r.p50! / 1000,
      p90Ms: r.p90! / 1000,
      p99Ms: r.p99! / 1000,
      maxMs: r.max! / 1000,
      non2xx: r.status!,
      socketErrors: r.connect! + r.read! + r.write! + r.timeout!,
      loadgenCpuMs: cpuMs,
    };
  } finally {
    fs.rmSync(script, { force: true });
  }
}

/**
 * Runs `runner` (autocannon-run.ts or paced-run.ts) in its own process and reads its result line.
 * The spec goes in a file: its variants (2,000 request bodies for POST /messages) are far more than
 * one command-line argument may hold (Linux: 128 KiB, else spawn fails with E2BIG).
 */
async function runNodeGenerator(runner: string, marker: string, spec: LoadSpec, workDir: string): Promise<LoadResult> {
  const specFile = path.join(workDir, `spec-${process.hrtime.bigint()}.json`);
  fs.writeFileSync(specFile, JSON.stringify(spec));
  try {
    const { stdout, cpuMs } = await runMeasured(process.execPath, ['--import', 'tsx', runner, specFile], (spec.durationS + 60) * 1000);
    const json = new RegExp(`${marker} (.*)`).exec(stdout)?.[1];
    if (!json) throw new Error(`${path.basename(runner)} printed no result:\n${stdout}`);
    return { ...(JSON.parse(json) as Omit<LoadResult, 'loadgenCpuMs'>), loadgenCpuMs: cpuMs };
  } finally {
    fs.rmSync(specFile, { force: true });
  }
}

/** The LoadSpec a generator process was given (the path of a JSON file). */
export function readLoadSpec(file: string | undefined): LoadSpec {
  if (!file) throw new Error('usage: <generator> <LoadSpec JSON file>');
  return JSON.parse(fs.readFileSync(file, 'utf8')) as LoadSpec;
}

/** The work directory for generated scripts; removed by the caller. */
export function makeWorkDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sf-bench-'));
}

/** One load run: paced when a rate is asked for, else wrk, or autocannon when wrk is missing. */
export function runLoad(spec: LoadSpec, workDir: string): Promise<LoadResult> {
  if (spec.rate !== undefined) return runNodeGenerator(PACED_RUNNER, 'BENCH_PACED', spec, workDir);
  const wrk = findWrk();
  if (wrk) return runWrk(wrk, spec, workDir);
  return runNodeGenerator(AUTOCANNON_RUNNER, 'BENCH_AC', spec, workDir);
}
