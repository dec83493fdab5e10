// What the service does with a failure nobody handles: an unhandled promise rejection is logged
// (error, with its stack) and the service keeps serving; an uncaught exception is logged (fatal) and
// the process exits 1. A real process; test/helpers/failure-probe.ts, preloaded, makes the failures.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, LEVEL, waitFor, waitForExit } from './helpers/processes.js';
import { Service, START_MS } from './helpers/service.js';

const probe = fileURLToPath(new URL('./helpers/failure-probe.ts', import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-failures-'));
let service: Service | undefined;

afterAll(async () => {
  await service?.kill();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('failures nobody handles', () => {
  it(
    'when a promise rejects unhandled, then it is logged and the service keeps serving; when an exception goes uncaught, then it is logged and the process exits 1',
    async () => {
      const port = await freePort();
      service = new Service(port, { DATABASE_URL: '', REDIS_URL: '', PGLITE_DIR: path.join(dir, 'pglite'), NODE_OPTIONS: `--import tsx --import ${probe}` });
      await service.waitForListening(1);

      process.kill(service.child.pid!, 'SIGUSR2');
      await waitFor('the rejection logged', () => service!.logs.matching(/^unhandled promise rejection$/).length > 0);

      const [rejection] = service.logs.matching(/^unhandled promise rejection$/);
      expect(rejection).toMatchObject({
        level: LEVEL.error,
        err: { type: 'Error', message: 'probe: a rejection nobody handles', stack: expect.stringContaining('failure-probe.ts') },
      });
      expect(service.running).toBe(true);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

      process.kill(service.child.pid!, 'SIGUSR2');
      const exit = await waitForExit(service.child, 10_000);

      expect(exit).toEqual({ code: 1, signal: null });
      expect(service.logs.matching(/^uncaught exception; exiting$/)).toEqual([
        expect.objectContaining({ level: LEVEL.fatal, err: expect.objectContaining({ message: 'probe: an exception nobody catches' }) }),
      ]);
    },
    START_MS + 20_000,
  );
});
