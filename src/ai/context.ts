// What an agent's answer depends on, as the AI sees it: the thread, its agent, its latest inbound
// message and its last messages (read by src/db/reply-context.ts). Always one workspace's, one thread's.
import type { Db } from '../db/database.js';
import { readRecentMessages, readReplyThread } from '../db/reply-context.js';
import type { AgentStatus, ThreadStatus } from '../db/schema.js';
import type { ThreadLine } from './chat.js';

export interface ReplyContext {
  threadId: string;
  contactId: string;
  channelId: string;
  status: ThreadStatus;
  agentId: string | null;
  /** Null when the thread has no AI agent (none, a person, or gone). */
  agent: { status: AgentStatus; model: string; instructions: string } | null;
  /** The thread's newest inbound message; a job for an older one has nothing to answer. */
  latestInboundId: string | null;
}

/** True when the thread's agent may answer: the thread is open and its agent is an AI agent, and active. */
export const agentMayAnswer = (context: ReplyContext): boolean => context.status === 'open' && context.agent?.status === 'active';

/** The thread and its agent; with `lock`, the thread row is locked until the caller's transaction ends. */
export async function readReplyContext(db: Db, workspaceId: string, threadId: string, options: { lock?: boolean } = {}): Promise<ReplyContext | undefined> {
  const row = await readReplyThread(db, workspaceId, threadId, options);
  if (!row) return undefined;
  return {
    threadId,
    contactId: row.contact_id,
    channelId: row.channel_id,
    status: row.status,
    agentId: row.agent_id,
    agent: row.agent_type === 'ai' && row.agent_status ? { status: row.agent_status, model: row.model!, instructions: row.instructions! } : null,
    latestInboundId: row.latest_inbound_id,
  };
}

/**
 * The thread's last `limit` messages, oldest first, as the AI is told of them, the one it answers
 * (`answering`) last: messages of one thread arriving at once may commit in another order than they
 * were created, and a customer's message created before an answer that did not see it is still
 * the one to answer now, after that answer.
 */
export async function recentLines(db: Db, workspaceId: string, threadId: string, limit: number, answering: string): Promise<ThreadLine[]> {
  const recent = await readRecentMessages(db, workspaceId, threadId, limit);
  const at = recent.findIndex((row) => row.id === answering);
  const rows = at === -1 ? recent : [...recent.slice(0, at), ...recent.slice(at + 1), recent[at]!];
  return rows.map((row) => ({
    direction: row.direction,
    content: row.content,
    attachments: row.attachments.map((a) => ({ id: a.id, type: a.type, caption: a.caption })),
  }));
}
