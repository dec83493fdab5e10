// An integrator's webhook endpoint at the network edge: a local HTTP server that records every
// request (headers and raw body, as a Standard Webhooks verifier needs them) and answers 204 unless
// the test scripts another status, a delay, or a dropped connection.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { closeServer, listenOnLoopback, readBody } from './processes.js';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** When the request arrived (Date.now()). */
  at: number;
  answer?: ReceiverAnswer;
}

export type ReceiverAnswer = { status: number; delayMs?: number; headers?: Record<string, string> } | { drop: true };

export type ReceiverScript = (request: ReceivedRequest, index: number) => ReceiverAnswer | undefined;

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private script: ReceiverScript | undefined;
  private waiters: Array<() => void> = [];
  private constructor(
    private readonly server: Server,
    /** The receiver's base URL, http://127.0.0.1:port */
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    const { server, origin } = await listenOnLoopback((req, res) => receiver.handle(req, res));
    server.keepAliveTimeout = 60_000;
    const receiver = new WebhookReceiver(server, `${origin}`);
    return receiver;
  }

  /** Answers with `script` where it returns an answer, 204 otherwise. */
  answer(script: ReceiverScript | undefined): void {
    this.script = script;
  }

  /** The requests to one path, in arrival order. */
  to(path: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** Waits until `count` requests reached `path` (any path when omitted). */
  async waitFor(count: number, path?: string, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = path === undefined ? this.requests : this.to(path);
      if (got.length >= count) return got;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${count} webhook requests${path ? ` to ${path}` : ''} (got ${got.length})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async close(): Promise<void> {
    await closeServer(this.server);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = (await readBody(req)).toString('utf8');
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers[name] = value;
    const request: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers, body, at: Date.now() };
    const index = this.requests.length;
    this.requests.push(request);
    const answer = this.script?.(request, index) ?? { status: 204 };
    request.answer = answer;
    for (const wake of this.waiters.splice(0)) wake();
    if ('drop' in answer) {
      req.socket.destroy();
      return;
    }
    if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
    if (res.destroyed) return;
    res.writeHead(answer.status, answer.headers);
    res.end();
  }
}
