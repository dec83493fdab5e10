// The service as operators run it: `node --import tsx src/server.ts`, or `node dist/src/server.js` under
// TEST_BUILD=dist, in a process group of its own, configured by environment only, its stdout captured
// as log lines.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { entryArgs } from '../build.js';
import { LogCapture, waitFor, waitForExit } from './processes.js';

// Each process compiles the TypeScript sources with tsx at start: on a busy 2-core machine that has
// taken over 20 s, so start-up waits are generous (they bound a hang, they measure nothing).
export const START_MS = 100_000;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export class Service {
  readonly logs = new LogCapture();
  stderr = '';
  readonly child: ChildProcess;

  /** Starts it on `port` in production mode; `env` adds to or overrides the defaults. */
  constructor(
    readonly port: number,
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, entryArgs('src/server'), {
      cwd: root,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        NODE_ENV: 'production',
        REDIS_PREFIX: `sf-test:${randomUUID()}:`,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        RATE_LIMIT_WINDOW_MS: '60000',
        ...env,
      },
    });
    this.child.stdout!.on('data', (chunk: Buffer) => this.logs.push(chunk));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The pids of the processes that logged 'listening'. */
  listening(): number[] {
    return this.logs.lines.filter((line) => line.msg === 'listening').map((line) => line.pid);
  }

  async waitForListening(count: number): Promise<number[]> {
    await waitFor(
      `${count} workers listening`,
      () => {
        if (!this.running) throw new Error(`the service exited with ${this.child.exitCode}: ${this.stderr.slice(-2_000)}`);
        return this.listening().length >= count;
      },
      START_MS,
    );
    return this.listening();
  }

  /** Stops the whole process group, whatever state a failed test left it in. */
  async kill(): Promise<void> {
    if (this.child.pid && this.running) {
      process.kill(-this.child.pid, 'SIGKILL');
      await waitForExit(this.child).catch(() => {});
    }
  }
}
