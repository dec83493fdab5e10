// What an operator scrapes at GET /metrics: the service's metrics, defined here once, in one registry
// (prom-client). Capabilities count through `metrics.<name>.inc(...)`; the gauges read at scrape time
// are in collect.ts. Label values are bounded: operationIds or route templates,
// status codes, job kinds, outcomes; never ids, workspaces or raw paths.
import { AggregatorRegistry, Counter, Histogram, collectDefaultMetrics } from 'prom-client';
import { JOB_KINDS } from '../jobs/kinds.js';

/**
 * The process's registry. An AggregatorRegistry is a Registry that, in a cluster's worker, also
 * answers the primary's requests for its metrics (metrics/cluster.ts sums the workers').
 */
export const registry = new AggregatorRegistry();
AggregatorRegistry.setRegistries([registry]);

let defaultsCollected = false;

/** Node's default process metrics (CPU, memory, event loop lag, GC, handles), once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry });
}

/** Latency buckets (seconds): a few milliseconds (a cached read) to the 30 s a request may take. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const metrics = {
  httpRequests: new Counter({
    name: 'sf_http_requests_total',
    help: 'HTTP requests answered, by operation (the contract operationId, or the route template outside the contract) and status code.',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
  }),
  httpDuration: new Histogram({
    name: 'sf_http_request_duration_seconds',
    help: 'Time from a request reaching the service to its answer sent (or the client leaving), by operation and status class (2xx..5xx).',
    labelNames: ['operation', 'status_class'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  }),
  jobOutcomes: new Counter({
    name: 'sf_job_outcomes_total',
    help: 'Job runs by kind and outcome: done (the job ended; a webhook or media attempt that failed and scheduled its own retry is done here, see their own counters), retried (a passing failure), failed (its last attempt failed: given up), postponed (not tried now, e.g. its target busy).',
    labelNames: ['kind', 'outcome'] as const,
    registers: [registry],
  }),
  webhookAttempts: new Counter({
    name: 'sf_webhook_attempts_total',
    help: "Webhook delivery attempts by outcome: succeeded, retrying (failed, another attempt is scheduled), failed (failed with no attempt left, or the endpoint disabled: the delivery's status is failed).",
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  automationRuns: new Counter({
    name: 'sf_automation_runs_total',
    help: 'Automation runs recorded, counted once committed, by status: succeeded, failed (an action failed), skipped (the loop guard).',
    labelNames: ['status'] as const,
    registers: [registry],
  }),
  automationsInline: new Counter({
    name: 'sf_automations_inline_total',
    help: "Customers' messages with automations to run, by how they ran: inline (in the message's transaction), behind (queued after an earlier run of the thread), failed (rolled back and queued for the workers).",
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  mediaFetches: new Counter({
    name: 'sf_media_fetches_total',
    help: "Attempts to fetch an inbound file from Meta by outcome: stored, retrying (a passing failure), failed (the file's status is failed).",
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
};

const KINDS: ReadonlySet<string> = new Set(JOB_KINDS);

/** Counts a job run's outcome under its kind (a queue outside the registry, the tests' or the bench's, as `other`). */
export function countJobOutcome(kind: string, outcome: 'done' | 'retried' | 'failed' | 'postponed'): void {
  metrics.jobOutcomes.inc({ kind: KINDS.has(kind) ? kind : 'other', outcome });
}
