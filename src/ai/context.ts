// What an agent's answer depends on, read from the database: the thread, its agent, its latest
// inbound message and its last messages. Always one workspace's, one thread's.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { AgentStatus, AgentType, ThreadStatus } from '../db/schema.js';
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
  const result = await sql<{
    contact_id: string;
    channel_id: string;
    status: ThreadStatus;
    agent_id: string | null;
    agent_type: AgentType | null;
    agent_status: AgentStatus | null;
    model: string | null;
    instructions: string | null;
    latest_inbound_id: string | null;
  }>`
    select t.contact_id, t.channel_id, t.status, t.agent_id, a.type as agent_type, a.status as agent_status, a.model, a.instructions,
           (select m.id from messages m
             where m.workspace_id = t.workspace_id and m.thread_id = t.id and m.direction = 'inbound'
             order by m.created_at desc, m.id desc
             limit 1) as latest_inbound_id
      from threads t
      left join agents a on a.workspace_id = t.workspace_id and a.id = t.agent_id
     where t.workspace_id = ${workspaceId} and t.id = ${threadId}
     ${options.lock ? sql`for update of t` : sql``}`.execute(db);
  const row = result.rows[0];
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

/** The thread's last `limit` messages, oldest first. */
export async function recentLines(db: Db, workspaceId: string, threadId: string, limit: number): Promise<ThreadLine[]> {
  const rows = await db
    .selectFrom('messages')
    .select(['direction', 'content', 'attachments'])
    .where('workspace_id', '=', workspaceId)
    .where('thread_id', '=', threadId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse().map((row) => ({
    direction: row.direction,
    content: row.content,
    attachments: row.attachments.map((a) => ({ id: a.id, type: a.type, caption: a.caption })),
  }));
}
