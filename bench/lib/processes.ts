// The bench's child processes: each in a process group of its own, so stopping one stops its
// workers too, and every group still alive is stopped when the bench ends, fails or is interrupted.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const children = new Set<ChildProcess>();

const alive = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

export interface Started {
  child: ChildProcess;
  /** The last lines the process wrote on stderr (and stdout when captured), for error messages. */
  output: () => string;
}

/** Starts `command` in `cwd` as the leader of a new process group; stdout is dropped unless `captureStdout`. */
export function startProcess(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, captureStdout = false): Started {
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', captureStdout ? 'pipe' : 'ignore', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let tail = '';
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString()).slice(-8_000);
  };
  child.stderr?.on('data', keep);
  child.stdout?.on('data', keep);
  return { child, output: () => tail };
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    // the group is gone already
  }
}

/** SIGTERM to the child's process group, SIGKILL after `graceMs`; resolves when the leader has exited. */
export async function stopProcess(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (!alive(child)) {
    signalGroup(child, 'SIGKILL');
    return;
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  signalGroup(child, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  // Workers of a cluster may outlive their primary by a moment.
  signalGroup(child, 'SIGKILL');
}

/** Stops every process group the bench started and has not stopped yet. */
export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((child) => stopProcess(child, 3_000)));
}

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The status of GET url, or 0 when nothing answers. */
export function httpStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { headers, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

/** Waits until GET url answers 200; throws with the process's last output when it exits or times out. */
export async function waitReady(url: string, started: Started, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await httpStatus(url)) !== 200) {
    if (!alive(started.child)) throw new Error(`process exited before ${url} answered 200:\n${started.output()}`);
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${url}:\n${started.output()}`);
    await sleep(100);
  }
}
