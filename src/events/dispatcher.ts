// Webhook deliveries, run by the queue: one job per delivery, claimed by one instance at a time
// (the queue's lease). Each attempt checks the URL again (resolved, every address public unless
// private URLs are allowed), sends the signed event, and records the outcome with the job's next
// step in one transaction: done, retried after the next of WEBHOOK_RETRY_DELAYS, or failed. An
// endpoint gets at most `endpointConcurrency` attempts at once per process, so a slow or dead one
// holds a few worker slots, never all of them: its surplus jobs step aside for a moment.
import { sql } from 'kysely';
import type { SecretBox } from '../channels/secrets.js';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import { finishJob, retryJob, type Job } from '../jobs/queue.js';
import type { JobResult, QueueHandler } from '../jobs/worker.js';
import { WEBHOOK_QUEUE, type WebhookJobPayload } from './record.js';
import { sendWebhook, WEBHOOK_TIMEOUT_MS, type AttemptResult } from './sender.js';
import { RefusedUrlError, resolveTarget } from './ssrf.js';

/** An endpoint whose attempts have all failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 86_400_000;

export interface WebhookDispatchOptions {
  db: Db;
  secrets: SecretBox | undefined;
  /** The waits after the 1st, 2nd, ... failed attempt; after the last the delivery is failed. */
  retryDelaysMs: readonly number[];
  allowPrivateUrls: boolean;
  /** Attempts to one endpoint this process makes at once. */
  endpointConcurrency: number;
  timeoutMs?: number;
  logger?: Logger;
}

interface DeliveryTarget {
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  url: string;
  secret: string;
  enabled: boolean;
  event_id: string;
  type: string;
  data: unknown;
  created_at: Date;
}

async function loadTarget(db: Db, workspaceId: string, deliveryId: string): Promise<DeliveryTarget | undefined> {
  const result = await sql<DeliveryTarget>`
    select d.status, d.attempts, e.url, e.secret, e.enabled, ev.id as event_id, ev.type, ev.data, ev.created_at
      from webhook_deliveries d
      join webhook_endpoints e on e.workspace_id = d.workspace_id and e.id = d.endpoint_id
      join events ev on ev.workspace_id = d.workspace_id and ev.id = d.event_id
     where d.workspace_id = ${workspaceId} and d.id = ${deliveryId}`.execute(db);
  return result.rows[0];
}

/** The body every attempt of an event sends: the event as GET /events/{id} answers it. */
export const eventBody = (target: Pick<DeliveryTarget, 'event_id' | 'type' | 'data' | 'created_at'>): string =>
  JSON.stringify({ id: target.event_id, type: target.type, createdAt: target.created_at.toISOString(), data: { object: target.data } });

export function webhookHandler(options: WebhookDispatchOptions): QueueHandler {
  const { db } = options;
  const busy = new Map<string, number>();
  const delays = options.retryDelaysMs;

  /** Records an attempt's outcome and the job's next step, in one transaction. */
  async function record(job: Job, payload: WebhookJobPayload & { manual?: boolean }, wasFailed: boolean, result: AttemptResult): Promise<void> {
    const now = new Date();
    await db.transaction().execute(async (trx) => {
      if (result.ok) {
        await sql`
          update webhook_deliveries
             set status = 'succeeded', attempts = attempts + 1, last_attempt_at = ${now}::timestamptz,
                 last_response_status = ${result.status}, last_error = null, next_attempt_at = null
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}`.execute(trx);
        await sql`
          update webhook_endpoints set failing_since = null
           where workspace_id = ${job.workspace_id} and id = ${payload.endpointId} and failing_since is not null`.execute(trx);
        await finishJob(trx, job);
        return;
      }
      const counted = await sql<{ attempts: number }>`
        update webhook_deliveries
           set attempts = attempts + 1, last_attempt_at = ${now}::timestamptz,
               last_response_status = ${result.status}, last_error = ${result.error}
         where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}
        returning attempts`.execute(trx);
      const attempts = counted.rows[0]?.attempts ?? Number.MAX_SAFE_INTEGER;
      // A manual retry of a failed delivery is one more attempt, not a new schedule.
      const delay = payload.manual && wasFailed ? undefined : delays[attempts - 1];
      if (delay === undefined) {
        await sql`
          update webhook_deliveries set status = 'failed', next_attempt_at = null
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}`.execute(trx);
        await finishJob(trx, job);
      } else {
        const next = new Date(now.getTime() + delay);
        await sql`
          update webhook_deliveries set status = 'pending', next_attempt_at = ${next}::timestamptz
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}`.execute(trx);
        await retryJob(trx, job, next, result.error);
      }
      // Five days of nothing but failures disable the endpoint, saying why.
      const since = new Date(now.getTime() - DISABLE_AFTER_MS);
      await sql`
        update webhook_endpoints
           set failing_since = coalesce(failing_since, ${now}::timestamptz),
               enabled = case when failing_since <= ${since}::timestamptz then false else enabled end,
               disabled_reason = case when failing_since <= ${since}::timestamptz
                 then 'every delivery attempt since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' failed (5 days); the last: ' || ${result.error}
                 else disabled_reason end,
               updated_at = case when failing_since <= ${since}::timestamptz then ${now}::timestamptz else updated_at end
         where workspace_id = ${job.workspace_id} and id = ${payload.endpointId}`.execute(trx);
    });
  }

  async function attempt(job: Job, payload: WebhookJobPayload & { manual?: boolean }, signal: AbortSignal): Promise<JobResult> {
    const target = await loadTarget(db, job.workspace_id, payload.deliveryId);
    // The endpoint or the event is gone (deleted, purged), or another job already settled it.
    if (!target || (target.status !== 'pending' && !payload.manual)) return { kind: 'done' };
    if (!target.enabled) {
      await db.transaction().execute(async (trx) => {
        await sql`
          update webhook_deliveries set status = 'failed', next_attempt_at = null, last_error = 'the endpoint is disabled'
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId} and status = 'pending'`.execute(trx);
        await finishJob(trx, job);
      });
      return { kind: 'finished' };
    }
    let result: AttemptResult;
    try {
      if (!options.secrets) throw new RefusedUrlError('the service cannot open the endpoint secret (SECRETS_KEY is not set)');
      const secret = options.secrets.open(target.secret);
      const checked = await resolveTarget(target.url, options.allowPrivateUrls);
      result = await sendWebhook({ target: checked, secret, eventId: target.event_id, body: eventBody(target), timeoutMs: options.timeoutMs ?? WEBHOOK_TIMEOUT_MS, signal });
    } catch (err) {
      if (!(err instanceof RefusedUrlError)) throw err;
      result = { ok: false, status: null, error: `refused to send: the URL ${err.message}` };
    }
    if (signal.aborted && !result.ok) throw new Error('stopped');
    await record(job, payload, target.status === 'failed', result);
    return { kind: 'finished' };
  }

  return {
    queue: WEBHOOK_QUEUE,
    maxAttempts: 20,
    retryBaseMs: 1_000,
    async run(job, signal) {
      const payload = job.payload as unknown as WebhookJobPayload & { manual?: boolean };
      const running = busy.get(payload.endpointId) ?? 0;
      if (running >= options.endpointConcurrency) return { kind: 'later', runAt: new Date(Date.now() + 50 + Math.floor(Math.random() * 150)) };
      busy.set(payload.endpointId, running + 1);
      try {
        return await attempt(job, payload, signal);
      } finally {
        const left = (busy.get(payload.endpointId) ?? 1) - 1;
        if (left > 0) busy.set(payload.endpointId, left);
        else busy.delete(payload.endpointId);
      }
    },
    async giveUp(job, lastError) {
      const payload = job.payload as unknown as WebhookJobPayload;
      await db.transaction().execute(async (trx) => {
        await sql`
          update webhook_deliveries set status = 'failed', next_attempt_at = null, last_error = ${lastError}
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}`.execute(trx);
        await finishJob(trx, job);
      });
    },
  };
}
