// What an AI agent's answer reads (src/ai/): a thread with its agent and its latest inbound message,
// the thread's last messages, and whether the thread is one an agent answers. Always one
// workspace's, one thread's.
import { sql } from 'kysely';
import type { Db } from './database.js';
import type { AgentStatus, AgentType, MessageRow, ThreadStatus } from './schema.js';

export interface ReplyThreadRow {
  contact_id: string;
  channel_id: string;
  status: ThreadStatus;
  agent_id: string | null;
  agent_type: AgentType | null;
  agent_status: AgentStatus | null;
  model: string | null;
  instructions: string | null;
  latest_inbound_id: string | null;
}

/** The thread, its agent and its newest inbound message's id; with `lock`, the thread row is locked until the caller's transaction ends. */
export async function readReplyThread(db: Db, workspaceId: string, threadId: string, options: { lock?: boolean } = {}): Promise<ReplyThreadRow | undefined> {
  const result = await sql<ReplyThreadRow>`
    select t.contact_id, t.channel_id, t.status, t.agent_id, a.type as agent_type, a.status as agent_status, a.model, a.instructions,
           (select m.id from messages m
             where m.workspace_id = t.workspace_id and m.thread_id = t.id and m.direction = 'inbound'
             order by m.created_at desc, m.id desc
             limit 1) as latest_inbound_id
      from threads t
      left join agents a on a.workspace_id = t.workspace_id and a.id = t.agent_id
     where t.workspace_id = ${workspaceId} and t.id = ${threadId}
     ${options.lock ? sql`for update of t` : sql``}`.execute(db);
  return result.rows[0];
}

/** The thread's last `limit` messages, oldest first. */
export async function readRecentMessages(
  db: Db,
  workspaceId: string,
  threadId: string,
  limit: number,
): Promise<Array<Pick<MessageRow, 'id' | 'direction' | 'content' | 'attachments'>>> {
  const rows = await db
    .selectFrom('messages')
    .select(['id', 'direction', 'content', 'attachments'])
    .where('workspace_id', '=', workspaceId)
    .where('thread_id', '=', threadId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse();
}
