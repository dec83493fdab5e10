// AI agents answering customers, on the durable queue: a consumer of the event log's inbound
// message.created (registered by src/event-consumers.ts when AI_BASE_URL is set) queues a reply job
// when the message's thread is open and its agent an active AI agent, in the statement recording
// the event (so in the message's transaction); the job marks the message read
// with the typing indicator (services/conversation.ts), asks the AI and sends
// its text through the same path as POST /messages (channel rules, delivery queue), or hands the
// thread to a person by round robin (services/round-robin.ts: one history entry, actor the agent). One job runs per thread at a
// time, and a job whose message is no longer the thread's latest inbound answers nothing: a burst
// gets one answer, to its last message.
import { sql } from 'kysely';
import { agentActor } from '../actor.js';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { ApiError } from '../errors.js';
import type { ReplyPayload } from '../jobs/kinds.js';
import { enqueueEachQuery, finishJob, notifyAddedQuery, type Job } from '../jobs/queue.js';
import type { EventConsumer } from '../events/fan-out.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { Logger } from '../logger.js';
import { sendMessage } from '../services/messages.js';
import { assignRoundRobin } from '../services/round-robin.js';
import { queueRead } from '../services/conversation.js';
import { AI_UNAVAILABLE, chatRequest, completeChat, CONTEXT_MESSAGES } from './chat.js';
import { agentMayAnswer, readReplyContext, recentLines, type ReplyContext } from './context.js';

export const AI_REPLY_QUEUE = 'ai-reply';

/** What queuing replies needs; undefined (no AI_BASE_URL) means agents never answer. */
export interface AiReplies {
  delayMs: number;
}

export function aiRepliesOf(config: Pick<Config, 'aiBaseUrl' | 'aiReplyDelayMs'>): AiReplies | undefined {
  return config.aiBaseUrl ? { delayMs: config.aiReplyDelayMs } : undefined;
}

/**
 * The event log's consumer that queues replies: an inbound message.created (not one the service
 * answered itself, as an NPS score) queues the thread's reply to it, due `delayMs` after it, when
 * the thread is open and its agent an active AI agent (checked in the same statement): a person's
 * threads queue nothing. Keyed per thread: its jobs run one at a time, and a job whose message is
 * no longer the thread's latest inbound answers nothing (a burst gets one answer, to its last).
 */
export function aiReplyConsumer(ai: AiReplies): EventConsumer {
  return ({ workspaceId, type, now, answered }) => {
    if (type !== 'message.created' || answered) return undefined;
    return {
      with: sql`, ai_reply_targets as materialized (
          select t.id::text as thread_id, s.data->>'id' as message_id
            from event_source s
            join threads t on t.workspace_id = ${workspaceId}::uuid and t.id = (s.data->>'threadId')::uuid
            join agents a on a.workspace_id = t.workspace_id and a.id = t.agent_id
           where s.data->>'direction' = 'inbound' and exists (select 1 from event)
             and t.status = 'open' and a.type = 'ai' and a.status = 'active'
        ), ai_reply_jobs as (
          ${enqueueEachQuery(AI_REPLY_QUEUE, {
            workspaceId,
            from: sql`ai_reply_targets t`,
            orderingKey: sql`'thread:' || t.thread_id`,
            payload: { threadId: sql`t.thread_id`, messageId: sql`t.message_id` },
            runAt: sql`(${now}::timestamptz + ${`${ai.delayMs} milliseconds`}::interval)`,
            createdAt: now,
          })}
        )`,
      notify: sql`, ${notifyAddedQuery(AI_REPLY_QUEUE, 'ai_reply_jobs')}`,
    };
  };
}

export type ReplyConfig = Pick<Config, 'aiBaseUrl' | 'aiApiKey' | 'aiTimeoutMs' | 'retryMaxAttempts' | 'retryBaseMs'>;

/** The job is still the thread's to answer: its message is the latest inbound, and the agent may answer. */
const stillAnswering = (context: ReplyContext | undefined, payload: ReplyPayload): context is ReplyContext & { agentId: string } =>
  context !== undefined && agentMayAnswer(context) && context.latestInboundId === payload.messageId;

class LostClaim extends Error {}

export function aiReplyHandler(options: { db: Db; config: ReplyConfig; logger: Logger }): QueueHandler<typeof AI_REPLY_QUEUE> {
  const { db, config } = options;
  const log = options.logger.child({ queue: AI_REPLY_QUEUE });

  /**
   * Hands the thread to a person by round robin with `reason` (history, actor the agent; nobody
   * eligible: to null, same reason), if the thread is still open and assigned to the agent.
   */
  async function handOff(job: Job<typeof AI_REPLY_QUEUE>, agentId: string, reason: string): Promise<void> {
    const { threadId } = job.payload;
    await db.transaction().execute(async (trx) => {
      const context = await readReplyContext(trx, job.workspace_id, threadId, { lock: true });
      if (context?.status === 'open' && context.agentId === agentId) {
        const thread = await assignRoundRobin(trx, job.workspace_id, threadId, agentActor(agentId), reason);
        log.info({ workspaceId: job.workspace_id, threadId, agentId, reason, to: thread?.agent_id ?? null }, 'agent handed the thread off');
      }
      if (!(await finishJob(trx, job))) throw new LostClaim();
    });
  }

  /** Sends the answer as the agent's message, if the job is still the thread's to answer when it commits. */
  async function reply(job: Job<typeof AI_REPLY_QUEUE>, agentId: string, text: string): Promise<void> {
    const payload = job.payload;
    try {
      await db.transaction().execute(async (trx) => {
        const context = await readReplyContext(trx, job.workspace_id, payload.threadId, { lock: true });
        if (stillAnswering(context, payload) && context.agentId === agentId) {
          const input = { contactId: context.contactId, channelId: context.channelId, content: text };
          await sendMessage(trx, job.workspace_id, input, agentActor(agentId), { agentId });
        }
        if (!(await finishJob(trx, job))) throw new LostClaim();
      });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      // The channel's rules refuse it (the 24-hour window, an erased contact): nothing to retry.
      log.warn({ workspaceId: job.workspace_id, threadId: payload.threadId, agentId, code: err.code }, 'agent answer not sendable; dropped');
      await finishJob(db, job);
    }
  }

  return {
    queue: AI_REPLY_QUEUE,
    maxAttempts: config.retryMaxAttempts,
    retryBaseMs: config.retryBaseMs,

    async run(job, signal) {
      const payload = job.payload;
      const context = await readReplyContext(db, job.workspace_id, payload.threadId);
      if (!stillAnswering(context, payload)) return { kind: 'done' };
      // The agent takes the message: the customer sees it read, and the agent typing while it writes.
      await queueRead(db, job.workspace_id, payload.threadId, true, new Date());
      const lines = await recentLines(db, job.workspace_id, payload.threadId, CONTEXT_MESSAGES, payload.messageId);
      const answer = await completeChat({
        baseUrl: config.aiBaseUrl!,
        apiKey: config.aiApiKey,
        body: chatRequest(context.agent!, lines),
        timeoutMs: config.aiTimeoutMs,
        signal,
      });
      if (answer.kind === 'failed') {
        if (answer.transient) return { kind: 'retry', error: answer.error };
        // The provider refuses the request itself (bad key, unknown model): the same request will
        // not fare better, so a person takes over now rather than after every retry.
        log.warn({ workspaceId: job.workspace_id, threadId: payload.threadId, agentId: context.agentId, error: answer.error }, 'AI refused the request');
        await handOff(job, context.agentId, AI_UNAVAILABLE);
      } else if (answer.kind === 'handoff') {
        await handOff(job, context.agentId, answer.reason);
      } else {
        await reply(job, context.agentId, answer.text);
      }
      return { kind: 'finished' };
    },

    async giveUp(job) {
      const payload = job.payload;
      const context = await readReplyContext(db, job.workspace_id, payload.threadId);
      if (context && agentMayAnswer(context) && context.agentId) await handOff(job, context.agentId, AI_UNAVAILABLE);
      else await finishJob(db, job);
    },
  };
}
