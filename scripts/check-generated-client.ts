// npm run test:generated-client: what an SDK team does with openapi.yaml, with a generator this
// project does not otherwise use. @hey-api/openapi-ts generates a fetch client into a scratch
// directory; a small program written against that client (test/generated-client/drive.ts) is
// compiled with tsc --strict and run with plain node against the real server (started here, as
// shipped, on DATABASE_URL's PostgreSQL in a scratch database, or PGlite), through a few operations
// and errors. Prints the time of each step; exits 1 on any failure.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { createScratchDatabase, provisionKey, root, scratchDir, startRealServer, stop, stopAll, type RealServer } from './lib/real-server.js';

const run = promisify(execFile);
const bin = (name: string): string => path.join(root, 'node_modules', '.bin', name);
const started = performance.now();
let lap = started;
const timings: Array<[string, number]> = [];
const timed = async <T>(step: string, work: () => Promise<T>): Promise<T> => {
  const result = await work();
  const now = performance.now();
  timings.push([step, (now - lap) / 1000]);
  lap = now;
  process.stdout.write(`generated client: ${step} (${((now - started) / 1000).toFixed(1)} s so far)\n`);
  return result;
};

/** Strict, as an SDK team would compile it; CommonJS so plain node resolves the generated imports. */
const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'commonjs',
    moduleResolution: 'node10',
    lib: ['ES2022', 'DOM', 'DOM.Iterable'],
    typeRoots: [path.join(root, 'node_modules', '@types')],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    outDir: 'dist',
  },
  include: ['client', 'drive.ts'],
};

async function main(): Promise<void> {
  const work = scratchDir('support-funnel-generated-client-');
  await timed('generate (@hey-api/openapi-ts, fetch client)', () =>
    run(bin('openapi-ts'), ['-i', path.join(root, 'openapi.yaml'), '-o', path.join(work, 'client'), '-c', '@hey-api/client-fetch', '-s', '--no-log-file'], {
      cwd: work,
    }),
  );
  const types = fs.readFileSync(path.join(work, 'client', 'types.gen.ts'), 'utf8');
  const shadowing = [...types.matchAll(/^export type (Error|Object|Date|Response|Request|Record|Map|Set|Promise) =/gm)].map((m) => m[1]);
  if (shadowing.length > 0) throw new Error(`generated types shadow JavaScript globals: ${shadowing.join(', ')}`);
  fs.copyFileSync(path.join(root, 'test/generated-client/drive.ts'), path.join(work, 'drive.ts'));
  fs.writeFileSync(path.join(work, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  fs.writeFileSync(path.join(work, 'package.json'), JSON.stringify({ private: true, type: 'commonjs' }));
  await timed('compile (tsc --strict)', () =>
    run(bin('tsc'), ['-p', work], { cwd: work }).catch((err: { stdout?: string; stderr?: string }) => {
      throw new Error(`tsc failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    }),
  );

  const serverUrl = process.env.DATABASE_URL || undefined;
  const scratch = serverUrl ? await createScratchDatabase(serverUrl, 'sf_client') : undefined;
  let server: RealServer | undefined;
  try {
    const pgliteDir = path.join(work, 'pglite');
    const key = await provisionKey(scratch?.url, pgliteDir, 'Generated client');
    server = await timed('start the real server', () => startRealServer({ databaseUrl: scratch?.url, pgliteDir }));
    const output = await timed('drive it', async () => {
      try {
        const { stdout } = await run(process.execPath, [path.join(work, 'dist', 'drive.js')], {
          env: { ...process.env, API_BASE_URL: server!.baseUrl, API_KEY: key.apiKey },
        });
        return stdout;
      } catch (err) {
        const failed = err as { stdout?: string; stderr?: string };
        throw new Error(`the generated client's program failed:\n${failed.stdout ?? ''}${failed.stderr ?? ''}`, { cause: err });
      }
    });
    process.stdout.write(output);
    for (const notice of server.notices) process.stdout.write(`generated client: the server warned about this machine: ${notice}\n`);
    if (server.problems.length > 0) throw new Error(`the server logged warnings or errors:\n${server.problems.join('\n')}`);
  } finally {
    if (server) await stop(server.child);
    await scratch?.drop();
  }
  const total = (performance.now() - started) / 1000;
  process.stdout.write(`generated client: passed in ${total.toFixed(1)} s (${timings.map(([step, s]) => `${step} ${s.toFixed(1)} s`).join(', ')})\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`generated client: ${err instanceof Error ? err.message : String(err)}\n`);
    // process.exit ends the run whether or not stopping the children failed.
    void stopAll().finally(() => process.exit(1));
  },
);
