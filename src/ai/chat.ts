// The AI agent's call: an OpenAI-compatible Chat Completions request (OpenAI, Azure, Ollama, vLLM)
// built from the agent and the thread (pure), sent as one plain POST (src/outbound/http.ts), and its
// answer read as text to send, a handoff to a person, or a failure (passing or not). A plain POST
// rather than the `openai` package: one request and one JSON shape, and the durable queue already
// retries with backoff across restarts and instances, which the package's in-process retries would
// only multiply.
import type { MessageDirection } from '../db/schema.js';
import { postJson } from '../outbound/http.js';

/** The tool an agent calls to pass the conversation to a person. */
export const HANDOFF_TOOL = 'handoff_to_human';
/** The reason recorded when the AI cannot be reached (or refuses every request). */
export const AI_UNAVAILABLE = 'ai_unavailable';
/** How many of the thread's messages, newest, the AI sees. */
export const CONTEXT_MESSAGES = 20;
/** The longest text a message may carry (Message.content, WhatsApp's text body). */
export const MAX_REPLY_CHARS = 4096;
/** The longest reason a history entry keeps (as PATCH /threads/{id} accepts). */
export const MAX_REASON_CHARS = 500;
/** The most of the provider's answer that is read; a longer one is a network failure. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface AgentBrief {
  model: string;
  instructions: string;
}

/** A message of the thread as the AI sees it; content null once the contact was erased (or a file without caption). */
export interface ThreadLine {
  direction: MessageDirection;
  content: string | null;
  /** Its files, as the AI is told of them: what they are, never their bytes. */
  attachments?: ReadonlyArray<{ id: string; type: string; caption: string | null }> | undefined;
}

/** How a line reads to the AI: each file as `[<type> <media id>]`, then the text (a file's caption). */
export function lineText(line: ThreadLine): string | null {
  const files = (line.attachments ?? []).map((a) => `[${a.type} ${a.id}]`);
  if (files.length === 0) return line.content;
  return line.content === null ? files.join(' ') : `${files.join(' ')} ${line.content}`;
}

/**
 * The Chat Completions request: the agent's instructions as the system message, then the thread's
 * lines oldest first (inbound as `user`, outbound as `assistant`, files named by type and id, never
 * their bytes; erased ones left out), and the
 * handoff tool.
 */
export function chatRequest(agent: AgentBrief, lines: readonly ThreadLine[]): Record<string, unknown> {
  const messages: ChatMessage[] = [{ role: 'system', content: agent.instructions }];
  for (const line of lines) {
    const content = lineText(line);
    if (content === null) continue;
    messages.push({ role: line.direction === 'inbound' ? 'user' : 'assistant', content });
  }
  return {
    model: agent.model,
    messages,
    tools: [
      {
        type: 'function',
        function: {
          name: HANDOFF_TOOL,
          description: 'Pass the conversation to a human attendant, when you cannot or should not answer it yourself.',
          parameters: {
            type: 'object',
            properties: { reason: { type: 'string', description: 'Why a person should take over, in a few words.' } },
            required: ['reason'],
          },
        },
      },
    ],
  };
}

export type ChatAnswer =
  | { kind: 'text'; text: string }
  | { kind: 'handoff'; reason: string }
  /** `transient`: worth another attempt (network, timeout, 408, 429, 5xx, an unreadable answer). */
  | { kind: 'failed'; transient: boolean; error: string };

const clean = (text: string, max: number): string => text.replaceAll('\u0000', '').trim().slice(0, max);

function handoffReason(rawArguments: unknown): string {
  try {
    const args = JSON.parse(typeof rawArguments === 'string' ? rawArguments : '{}') as { reason?: unknown };
    if (typeof args.reason === 'string' && clean(args.reason, MAX_REASON_CHARS)) return clean(args.reason, MAX_REASON_CHARS);
  } catch {
    // a model's broken JSON still asked for a person
  }
  return 'handoff_requested';
}

/** Reads a 2xx Chat Completions body: a handoff call wins over text; neither is a failure. */
export function readChatAnswer(body: unknown): ChatAnswer {
  const message = (body as { choices?: Array<{ message?: { content?: unknown; tool_calls?: unknown } }> } | null)?.choices?.[0]?.message;
  if (!message) return { kind: 'failed', transient: true, error: 'the answer has no choices[0].message' };
  const calls = Array.isArray(message.tool_calls) ? (message.tool_calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) : [];
  const handoff = calls.find((call) => call?.function?.name === HANDOFF_TOOL);
  if (handoff) return { kind: 'handoff', reason: handoffReason(handoff.function?.arguments) };
  const text = typeof message.content === 'string' ? clean(message.content, MAX_REPLY_CHARS) : '';
  if (text) return { kind: 'text', text };
  return { kind: 'failed', transient: true, error: 'the answer has neither text nor a handoff' };
}

/** Whether an HTTP status is worth another attempt. */
export const transientStatus = (status: number): boolean => status === 408 || status === 429 || status >= 500;

export interface ChatCall {
  baseUrl: string;
  apiKey: string | undefined;
  body: Record<string, unknown>;
  timeoutMs: number;
  /** The worker's: aborted when the process stops (the call then throws, and the job is released) or when another instance took the job (its outcome is then not recorded). */
  signal: AbortSignal;
}

/** POST {baseUrl}/chat/completions; never throws except when `signal` aborts. */
export async function completeChat(call: ChatCall): Promise<ChatAnswer> {
  const outcome = await postJson(`${call.baseUrl}/chat/completions`, {
    headers: call.apiKey ? { authorization: `Bearer ${call.apiKey}` } : {},
    body: JSON.stringify(call.body),
    timeoutMs: call.timeoutMs,
    maxBodyBytes: MAX_ANSWER_BYTES,
    signal: call.signal,
  });
  if ('failure' in outcome) return { kind: 'failed', transient: true, error: outcome.failure === 'timeout' ? outcome.message : `network: ${outcome.message}` };
  const { status, text } = outcome;
  if (status < 200 || status >= 300) {
    // The provider's own message, short: it names the problem (bad model, bad key), never the conversation.
    return { kind: 'failed', transient: transientStatus(status), error: `HTTP ${status}: ${text.slice(0, 300)}` };
  }
  try {
    return readChatAnswer(JSON.parse(text));
  } catch {
    return { kind: 'failed', transient: true, error: 'the answer is not JSON' };
  }
}
