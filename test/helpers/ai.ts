// A stand-in for an OpenAI-compatible Chat Completions API at the network edge: a local HTTP server
// that takes `POST /v1/chat/completions` as OpenAI documents it, records every request, and answers
// with a chat.completion (text or a tool call) or an error, as the test scripts, after an optional
// delay. Unscripted, it answers with a short text.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { closeServer, listenOnLoopback, readBody } from './processes.js';

export interface ChatRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: any;
  at: number;
}

export type ChatAnswer = { status: number; body?: unknown; delayMs?: number } | { drop: true };
export type ChatScript = (request: ChatRequest, index: number) => ChatAnswer | undefined;

function completion(request: ChatRequest, message: Record<string, unknown>, finishReason: string): ChatAnswer {
  return {
    status: 200,
    body: {
      id: `chatcmpl-${randomBytes(12).toString('base64url')}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: request.body?.model,
      choices: [{ index: 0, message: { role: 'assistant', refusal: null, ...message }, logprobs: null, finish_reason: finishReason }],
      usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 },
    },
  };
}

/** The assistant answers with text. */
export const textAnswer =
  (text: string, delayMs?: number) =>
  (request: ChatRequest): ChatAnswer => ({ ...completion(request, { content: text }, 'stop'), ...(delayMs && { delayMs }) });

/** The assistant calls a tool (handoff_to_human by default) with these arguments. */
export const toolCallAnswer =
  (args: Record<string, unknown> | string, name = 'handoff_to_human') =>
  (request: ChatRequest): ChatAnswer =>
    completion(
      request,
      {
        content: null,
        tool_calls: [
          {
            id: `call_${randomBytes(8).toString('hex')}`,
            type: 'function',
            function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
          },
        ],
      },
      'tool_calls',
    );

/** An OpenAI error body with its status. */
export const errorAnswer = (status: number, message = 'The server had an error while processing your request.'): ChatAnswer => ({
  status,
  body: { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } },
});

export class AiDouble {
  readonly requests: ChatRequest[] = [];
  private script: ChatScript | undefined;
  private readonly scripts = new Map<string, ChatScript>();
  private constructor(
    private readonly server: Server,
    /** The base URL to give as AI_BASE_URL (ends in /v1, as OpenAI's does). */
    readonly url: string,
  ) {}

  static async start(): Promise<AiDouble> {
    const { server, origin } = await listenOnLoopback((req, res) => double.handle(req, res));
    const double = new AiDouble(server, `${origin}/v1`);
    return double;
  }

  /** Answers every request with `script` where it returns an answer. */
  answer(script: ChatScript | undefined): void {
    this.script = script;
  }

  /** Answers the requests for one model (a test's own agent) with `script`, before any other. */
  answerFor(model: string, script: ChatScript): void {
    this.scripts.set(model, script);
  }

  /** The requests for one model, in arrival order. */
  forModel(model: string): ChatRequest[] {
    return this.requests.filter((r) => r.body?.model === model);
  }

  async close(): Promise<void> {
    await closeServer(this.server);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = (await readBody(req)).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const request: ChatRequest = {
      method: req.method ?? '',
      path: new URL(req.url ?? '/', 'http://ai').pathname,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      body,
      at: Date.now(),
    };
    const index = this.requests.push(request) - 1;
    let answer: ChatAnswer;
    if (req.method !== 'POST' || request.path !== '/v1/chat/completions') answer = errorAnswer(404, `Unknown request URL: ${req.method} ${request.path}`);
    else answer = this.scripts.get(request.body?.model)?.(request, index) ?? this.script?.(request, index) ?? textAnswer('Olá! Como posso ajudar?')(request);
    if ('drop' in answer) {
      req.socket.destroy();
      return;
    }
    if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
    if (res.destroyed) return;
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
  }
}
