// Child processes a test owns: a redis-server on a port of its own (to stop and restart mid-test),
// free ports, and JSON log lines captured from a logger or a child's stdout.
import { spawn, type ChildProcess } from 'node:child_process';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A real HTTP server on loopback, handing each request to `handle`: the base of the doubles of what
 * lies outside the service (Graph API, AI API, an integrator's webhook endpoint). `origin` is
 * http://127.0.0.1:port.
 */
export async function listenOnLoopback(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}` };
}

/** Closes a server of listenOnLoopback, its kept-alive connections included. */
export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** The whole body of a request. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns true; throws `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

const exited = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null;

export async function waitForExit(child: ChildProcess, timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (!exited(child)) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`process ${child.pid} still running after ${timeoutMs} ms`)), timeoutMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
  return { code: child.exitCode, signal: child.signalCode };
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A throwaway redis-server (no persistence) that a test may kill, freeze and start again on the same port. */
export class RedisServer {
  private child: ChildProcess | undefined;
  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** One on a free port, not started yet. */
  static async create(): Promise<RedisServer> {
    return new RedisServer(await freePort());
  }

  static async start(): Promise<RedisServer> {
    const server = await RedisServer.create();
    await server.restart();
    return server;
  }

  /** Starts it (again) on its port and waits until it accepts connections. */
  async restart(): Promise<void> {
    if (this.child && !exited(this.child)) throw new Error('redis-server is still running');
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    this.child = child;
    let failed: Error | undefined;
    child.once('error', (err) => (failed = err));
    await waitFor(`redis-server on port ${this.port}`, () => {
      if (failed) throw failed;
      if (exited(child)) throw new Error(`redis-server exited with ${child.exitCode ?? child.signalCode}`);
      return accepts(this.port);
    });
  }

  /** Kills it outright (a crash, not a shutdown) and waits until it is gone. */
  async kill(): Promise<void> {
    if (!this.child || exited(this.child)) return;
    this.child.kill('SIGKILL');
    await waitForExit(this.child);
  }

  /** Freezes it: the connection stays open, nothing answers. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.child?.kill('SIGCONT');
  }
}

export interface LogLine {
  level: number;
  msg: string;
  pid: number;
  [field: string]: unknown;
}

export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

/** Collects newline-delimited JSON log lines, from a pino destination or a child's stdout. */
export class LogCapture {
  readonly lines: LogLine[] = [];
  private partial = '';

  /** A pino DestinationStream. */
  readonly destination = { write: (chunk: string): void => this.push(chunk) };

  push(chunk: string | Buffer): void {
    const text = this.partial + chunk.toString();
    const parts = text.split('\n');
    this.partial = parts.pop() ?? '';
    for (const part of parts) {
      if (part.trim() === '') continue;
      try {
        this.lines.push(JSON.parse(part) as LogLine);
      } catch {
        this.lines.push({ level: 0, msg: part, pid: 0 });
      }
    }
  }

  matching(msg: RegExp, level?: number): LogLine[] {
    return this.lines.filter((line) => msg.test(line.msg) && (level === undefined || line.level === level));
  }
}

/**
 * `times` requests sent by fetch from a process of its own (its own event loop, as a real client:
 * from the test's process a client's writes and the server's reads take turns), each with a body of
 * `prefix`, `size` bytes of `x`, then `suffix`; what each ended as: its status, or its error's code.
 */
export async function fetchFromAnotherProcess(
  url: string,
  options: { headers: Record<string, string>; prefix?: string; size: number; suffix?: string; times: number },
): Promise<Array<number | string>> {
  const script = `
    const { url, headers, prefix, size, suffix, times } = JSON.parse(process.argv[1]);
    const body = Buffer.concat([Buffer.from(prefix), Buffer.alloc(size, 'x'), Buffer.from(suffix)]);
    const outcomes = [];
    for (let i = 0; i < times; i++) {
      outcomes.push(await fetch(url, { method: 'POST', headers, body }).then(
        async (response) => { await response.arrayBuffer(); return response.status; },
        (err) => err.cause?.code ?? err.message));
    }
    process.stdout.write(JSON.stringify(outcomes));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, JSON.stringify({ url, prefix: '', suffix: '', ...options })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const { code } = await waitForExit(child, 60_000);
  if (code !== 0) throw new Error(`the client process exited ${code}`);
  return JSON.parse(out) as Array<number | string>;
}
