// Webhook deliveries, run by the queue: one job per delivery, claimed by one instance at a time
// (the queue's lease). Each attempt checks the URL again (resolved, every address public unless
// private URLs are allowed), sends the signed event, and records the outcome with the job's next
// step in one statement: done, retried after the next of WEBHOOK_RETRY_DELAYS, or failed. An
// endpoint gets at most `endpointConcurrency` attempts at once per process, so a slow or dead one
// holds a few worker slots, never all of them: its surplus jobs wait a moment in process for a
// slot (a fast endpoint frees one within milliseconds), or step aside when it is slow.
import { CompiledQuery, sql } from 'kysely';
import type { KeyObject } from 'node:crypto';
import pg from 'pg';
import type { SecretBox } from '../secrets.js';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import {
  CLAIM_PARAMETERS,
  finishJob,
  finishJobsParameters,
  finishJobsSql,
  otherJobsLike,
  retryOrFinishJobQueries,
  runJobsNow,
  type HeldJob,
  type Job,
  type Prefetch,
} from '../jobs/queue.js';
import { batcher } from '../jobs/batch.js';
import type { JobResult, QueueHandler } from '../jobs/worker.js';
import type { WebhookJobPayload } from '../jobs/kinds.js';
import { eventRowToEvent, WEBHOOK_QUEUE } from './record.js';
import type { EventRow, WebhookDeliveryStatus } from '../db/schema.js';
import { sendWebhook, webhookKey, WEBHOOK_TIMEOUT_MS, type AttemptResult } from './sender.js';
import { RefusedUrlError, resolveTarget } from '../outbound/ssrf.js';
import { metrics } from '../metrics/registry.js';

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
  status: WebhookDeliveryStatus;
  attempts: number;
  url: string;
  secret: string;
  enabled: boolean;
  event_id: string;
  type: string;
  data: EventRow['data'];
  actor_type: EventRow['actor_type'];
  actor_id: string | null;
  source: EventRow['source'];
  metric: EventRow['metric'];
  merged_ids: EventRow['merged_ids'];
  created_at: Date;
}

/** A timestamptz as the pg driver reads one, for the prefetched event's time (the same instant GET /events/{id} shows). */
const parseTimestamptz = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ) as (text: string) => Date;

/**
 * The claim's prefetch (jobs/queue.ts): the target of each claimed job read in the claim's own
 * statement, as loadTarget reads it (the event's time as text, parsed as the driver parses it).
 */
const prefetchTarget: Prefetch = (job) => sql`
    select json_build_object('status', d.status, 'attempts', d.attempts, 'url', e.url, 'secret', e.secret, 'enabled', e.enabled,
                             'event_id', ev.id, 'type', ev.type, 'data', ev.data, 'actor_type', ev.actor_type, 'actor_id', ev.actor_id,
                             'source', ev.source, 'metric', ev.metric, 'merged_ids', ev.merged_ids, 'created_at', ev.created_at::text) as prefetched
      from webhook_deliveries d
      join webhook_endpoints e on e.workspace_id = d.workspace_id and e.id = d.endpoint_id
      join events ev on ev.workspace_id = d.workspace_id and ev.id = d.event_id
     where d.workspace_id = ${job.workspaceId} and d.id = ${job.payload('deliveryId')}::uuid`;

/**
 * The prefetched target of a claimed job, or undefined: not prefetched, or not found. Not found is
 * not gone: claim_jobs (a volatile function) sees jobs committed after its statement's snapshot
 * began, which the prefetch (of that snapshot) does not, so a delivery committed just then is read again.
 */
function prefetchedTarget(job: WebhookJob): DeliveryTarget | undefined {
  const found = job.prefetched as (Omit<DeliveryTarget, 'created_at'> & { created_at: string }) | null | undefined;
  if (found === undefined || found === null) return undefined;
  return { ...found, created_at: parseTimestamptz(found.created_at) };
}

/** Endpoint secrets' HMAC keys by their sealed form, opened and decoded once (AES-GCM and base64 on every attempt showed in the profiles); a changed secret is another key. */
const OPENED_SECRETS_MAX = 1_000;

async function loadTarget(db: Db, workspaceId: string, deliveryId: string): Promise<DeliveryTarget | undefined> {
  const result = await sql<DeliveryTarget>`
    select d.status, d.attempts, e.url, e.secret, e.enabled, ev.id as event_id, ev.type, ev.data, ev.actor_type, ev.actor_id, ev.source, ev.metric, ev.merged_ids, ev.created_at
      from webhook_deliveries d
      join webhook_endpoints e on e.workspace_id = d.workspace_id and e.id = d.endpoint_id
      join events ev on ev.workspace_id = d.workspace_id and ev.id = d.event_id
     where d.workspace_id = ${workspaceId} and d.id = ${deliveryId}`.execute(db);
  return result.rows[0];
}

/** The body every attempt of an event sends: the event as GET /events/{id} answers it. */
export const eventBody = (
  target: Pick<DeliveryTarget, 'event_id' | 'type' | 'data' | 'actor_type' | 'actor_id' | 'source' | 'metric' | 'created_at'> &
    Partial<Pick<DeliveryTarget, 'merged_ids'>>,
): string => JSON.stringify(eventRowToEvent({ ...target, id: target.event_id }));

/** Slots of one endpoint in this process: attempts running (with their start times) and jobs waiting for one. */
interface EndpointSlots {
  running: Set<number>;
  waiting: Array<() => void>;
}

/** How long a claimed job may wait in process for its endpoint's slot before it steps aside. */
const WAIT_FOR_SLOT_MS = 250;
/** An endpoint whose oldest running attempt is older than this is slow: its extra jobs step aside at once. */
const SLOW_MS = 1_000;
/** How long successful attempts wait to be recorded together (one statement for those succeeding meanwhile). */
const SUCCESS_GATHER_MS = 20;
/** The least time between two claims while deliveries keep coming (the worker's claimIntervalMs). */
const CLAIM_INTERVAL_MS = 20;
/** How often a manual retry looks whether the attempt it waits for has ended. */
const OTHER_ATTEMPT_POLL_MS = 250;

/**
 * The successes' record as WITH queries of a fixed text, its parameters from `$first`: the
 * workspaces, deliveries, endpoints, answers' statuses and times, then their jobs (finishJobsSql).
 */
const recordSuccesses = (first: number): string => `
  succeeded as (
    select * from unnest($${first}::uuid[], $${first + 1}::uuid[], $${first + 2}::uuid[], $${first + 3}::int[], $${first + 4}::timestamptz[])
      as d (workspace_id, delivery_id, endpoint_id, status, at)
  ), delivered as (
    update webhook_deliveries w
       set status = 'succeeded', attempts = w.attempts + 1, last_attempt_at = s.at,
           last_response_status = s.status, last_error = null, next_attempt_at = null
      from succeeded s
     where w.workspace_id = s.workspace_id and w.id = s.delivery_id
  ), streak as (
    update webhook_endpoints e set failing_since = null
      from (select distinct workspace_id, endpoint_id from succeeded) s
     where e.workspace_id = s.workspace_id and e.id = s.endpoint_id and e.failing_since is not null
  ), succeeded_jobs as (
    ${finishJobsSql(first + 5)}
  )`;

/** The successes recorded in a statement of their own (no claim to travel with). */
const RECORD_SUCCESSES = `with ${recordSuccesses(1)} select 1`;
/** The successes recorded in the worker's next claim (CarriedWrites). */
const CARRIED_SUCCESSES = recordSuccesses(CLAIM_PARAMETERS + 1);

interface Success {
  job: HeldJob;
  deliveryId: string;
  endpointId: string;
  status: number;
  at: Date;
}

const successParameters = (done: readonly Success[]): unknown[] => [
  done.map((d) => d.job.workspace_id),
  done.map((d) => d.deliveryId),
  done.map((d) => d.endpointId),
  done.map((d) => d.status),
  done.map((d) => d.at),
  ...finishJobsParameters(done.map((d) => d.job)),
];

type WebhookJob = Job<typeof WEBHOOK_QUEUE>;

export function webhookHandler(options: WebhookDispatchOptions): QueueHandler<typeof WEBHOOK_QUEUE> {
  const { db } = options;
  const slots = new Map<string, EndpointSlots>();
  const delays = options.retryDelaysMs.map((d) => Math.round(d));
  const cap = options.endpointConcurrency;
  const opened = new Map<string, KeyObject>();

  /** The HMAC key of an endpoint's sealed secret: opened and decoded once per sealed value. */
  function signingKey(sealed: string): KeyObject {
    let key = opened.get(sealed);
    if (key === undefined) {
      if (!options.secrets) throw new RefusedUrlError('the service cannot open the endpoint secret (SECRETS_KEY is not set)');
      key = webhookKey(options.secrets.open(sealed));
      if (opened.size >= OPENED_SECRETS_MAX) opened.clear();
      opened.set(sealed, key);
    }
    return key;
  }

  /**
   * Successful attempts are recorded together: the attempts that succeed within SUCCESS_GATHER_MS
   * of each other share one statement (their deliveries, their endpoints' streaks, their jobs
   * finished), or the worker's next claim if it comes first (carry). An attempt's job is held until
   * then, so a process killed meanwhile leaves it to be sent again (at least once).
   */
  const successes = batcher<Success>(
    async (done) => {
      await db.executeQuery(CompiledQuery.raw(RECORD_SUCCESSES, successParameters(done)));
    },
    { delayMs: SUCCESS_GATHER_MS, max: 128 },
  );

  /**
   * A slot of the endpoint: at once when one is free; else, unless the endpoint is slow or already
   * has `cap` jobs waiting, after waiting up to WAIT_FOR_SLOT_MS. False: the job steps aside (it
   * goes back to the queue untried), so a slow endpoint holds at most `cap` worker slots running
   * and, briefly, `cap` waiting.
   */
  async function acquire(endpointId: string): Promise<number | undefined> {
    let entry = slots.get(endpointId);
    if (!entry) slots.set(endpointId, (entry = { running: new Set(), waiting: [] }));
    const take = (): number => {
      let at = performance.now();
      while (entry.running.has(at)) at += 1e-6;
      entry.running.add(at);
      return at;
    };
    if (entry.running.size < cap) return take();
    const oldest = Math.min(...entry.running);
    if (performance.now() - oldest > SLOW_MS || entry.waiting.length >= cap) return undefined;
    const got = await new Promise<boolean>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        entry.waiting.splice(entry.waiting.indexOf(wake), 1);
        resolve(false);
      }, WAIT_FOR_SLOT_MS);
      entry.waiting.push(wake);
    });
    return got ? take() : undefined;
  }

  function release(endpointId: string, slot: number): void {
    const entry = slots.get(endpointId);
    if (!entry) return;
    entry.running.delete(slot);
    const next = entry.waiting.shift();
    if (next) next();
    else if (entry.running.size === 0) slots.delete(endpointId);
  }

  /**
   * Records an attempt's outcome and the job's next step in one statement: the delivery, the
   * endpoint's failing streak (5 days of failures disable it, saying why), and the job finished or
   * put back for its retry. A manual retry of a failed delivery is one more attempt, not a new schedule.
   */
  async function record(job: WebhookJob, payload: WebhookJobPayload, result: AttemptResult): Promise<void> {
    const now = new Date();
    if (result.ok) {
      await successes.add({ job, deliveryId: payload.deliveryId, endpointId: payload.endpointId, status: result.status, at: now });
      return;
    }
    const final = Boolean(payload.manual && payload.wasFailed);
    const since = new Date(now.getTime() - DISABLE_AFTER_MS);
    await sql`
      with failed as (
        update webhook_deliveries d
           set attempts = d.attempts + 1, last_attempt_at = ${now}::timestamptz,
               last_response_status = ${result.status}, last_error = ${result.error},
               status = case when ${final} or d.attempts + 1 > ${delays.length} then 'failed' else 'pending' end,
               next_attempt_at = case when ${final} or d.attempts + 1 > ${delays.length} then null
                                      else ${now}::timestamptz + (${delays}::int[])[d.attempts + 1] * interval '1 millisecond' end
         where d.workspace_id = ${job.workspace_id} and d.id = ${payload.deliveryId}
        returning d.status, d.next_attempt_at
      ), ${retryOrFinishJobQueries(job, { from: sql`failed f`, retryAt: sql`f.next_attempt_at`, error: result.error })}
      update webhook_endpoints
         set failing_since = coalesce(failing_since, ${now}::timestamptz),
             enabled = case when failing_since <= ${since}::timestamptz then false else enabled end,
             disabled_reason = case when failing_since <= ${since}::timestamptz
               then 'every delivery attempt since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' failed (5 days); the last: ' || ${result.error}
               else disabled_reason end,
             updated_at = case when failing_since <= ${since}::timestamptz then ${now}::timestamptz else updated_at end
       where workspace_id = ${job.workspace_id} and id = ${payload.endpointId}`.execute(db);
  }

  /**
   * A manual retry asked for while another job of the delivery was running its attempt: it waits
   * for that attempt to end (two attempts of one delivery never overlap); then, when that job
   * stays for a retry, makes it due now in its place, and when the delivery has succeeded since
   * the retry was asked for, it is done. Undefined when it should make its attempt.
   */
  async function deferToOtherJob(job: WebhookJob, payload: WebhookJobPayload): Promise<JobResult | undefined> {
    const rows = await otherJobsLike(db, job, 'deliveryId');
    if (rows.length === 0) {
      const { rows: delivered } = await sql`
        select 1 from webhook_deliveries
         where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId} and status = 'succeeded' and last_attempt_at >= ${job.created_at}::timestamptz`.execute(
        db,
      );
      return delivered.length > 0 ? { kind: 'done' } : undefined;
    }
    if (rows.some((row) => row.running)) return { kind: 'later', runAt: new Date(Date.now() + OTHER_ATTEMPT_POLL_MS) };
    await runJobsNow(
      db,
      job.workspace_id,
      rows.map((row) => row.id),
    );
    return { kind: 'done' };
  }

  /**
   * One attempt. `fresh`: the target the claim prefetched may be used (the job got its slot at once,
   * so it was read a moment ago); otherwise it is read now. `sent` is called once the endpoint
   * answered (or did not), before the outcome is recorded: the endpoint's slot is free from then.
   */
  async function attempt(job: WebhookJob, payload: WebhookJobPayload, signal: AbortSignal, fresh: boolean, sent: () => void): Promise<JobResult> {
    if (payload.manual) {
      const deferred = await deferToOtherJob(job, payload);
      if (deferred) return deferred;
    }
    const prefetched = fresh && !payload.manual ? prefetchedTarget(job) : undefined;
    const target = prefetched ?? (await loadTarget(db, job.workspace_id, payload.deliveryId));
    // The endpoint or the event is gone (deleted, purged), or another job already settled it.
    if (!target || (target.status !== 'pending' && !payload.manual)) return { kind: 'done' };
    if (!target.enabled) {
      await db.transaction().execute(async (trx) => {
        await sql`
          update webhook_deliveries set status = 'failed', next_attempt_at = null, last_error = 'the endpoint is disabled'
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId} and status = 'pending'`.execute(trx);
        await finishJob(trx, job);
      });
      metrics.webhookAttempts.inc({ outcome: 'failed' });
      return { kind: 'finished' };
    }
    let result: AttemptResult;
    try {
      const key = signingKey(target.secret);
      const checked = await resolveTarget(target.url, options.allowPrivateUrls);
      result = await sendWebhook({
        target: checked,
        key,
        eventId: target.event_id,
        body: eventBody(target),
        timeoutMs: options.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
        signal,
      });
    } catch (err) {
      if (!(err instanceof RefusedUrlError)) throw err;
      result = { ok: false, status: null, error: `refused to send: the URL ${err.message}` };
    }
    sent();
    if (signal.aborted && !result.ok) throw new Error('stopped');
    await record(job, payload, result);
    metrics.webhookAttempts.inc({
      outcome: result.ok ? 'succeeded' : (payload.manual && payload.wasFailed) || target.attempts + 1 > delays.length ? 'failed' : 'retrying',
    });
    return { kind: 'finished' };
  }

  return {
    queue: WEBHOOK_QUEUE,
    maxAttempts: 20,
    retryBaseMs: 1_000,
    // The claim takes per endpoint only what acquire would run or let wait (`cap` each, less those
    // running and waiting): under a backlog to one endpoint the worker no longer claims its 64
    // slots' worth to put most of them back (one update each, due again 0.5-1.5 s later). A slow
    // endpoint's jobs are still all taken, to step aside at once: they leave the head of the queue
    // to the other endpoints' jobs, however many of them there are.
    claimGroups() {
      const allowance: Record<string, number> = {};
      const now = performance.now();
      for (const [endpointId, entry] of slots) {
        const slow = entry.running.size >= cap && now - Math.min(...entry.running) > SLOW_MS;
        allowance[endpointId] = slow ? 1_000_000 : Math.max(0, 2 * cap - entry.running.size - entry.waiting.length);
      }
      return { field: 'endpointId', allowance, otherwise: 2 * cap };
    },
    prefetch: prefetchTarget,
    // Successes waiting for their statement travel in the claim when one comes first: while events
    // keep coming (a claim every CLAIM_INTERVAL_MS), recording them costs no round trip of its own.
    carry() {
      const taken = successes.take();
      return taken && { sql: CARRIED_SUCCESSES, parameters: successParameters(taken.items), settled: taken.settled };
    },
    // Notifications coming faster than this (one per event) are answered by one claim for them all.
    claimIntervalMs: CLAIM_INTERVAL_MS,
    async run(job, signal) {
      const { payload } = job;
      const waiting = slots.get(payload.endpointId);
      const atOnce = !waiting || waiting.running.size < cap;
      const slot = await acquire(payload.endpointId);
      if (slot === undefined) return { kind: 'later', runAt: new Date(Date.now() + 500 + Math.floor(Math.random() * 1_000)) };
      let held = true;
      const free = (): void => {
        if (held) release(payload.endpointId, slot);
        held = false;
      };
      try {
        return await attempt(job, payload, signal, atOnce, free);
      } finally {
        free();
      }
    },
    async giveUp(job, lastError) {
      const { payload } = job;
      await db.transaction().execute(async (trx) => {
        await sql`
          update webhook_deliveries set status = 'failed', next_attempt_at = null, last_error = ${lastError}
           where workspace_id = ${job.workspace_id} and id = ${payload.deliveryId}`.execute(trx);
        await finishJob(trx, job);
      });
      metrics.webhookAttempts.inc({ outcome: 'failed' });
    },
  };
}
