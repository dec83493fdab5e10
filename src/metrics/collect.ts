// The gauges read at scrape time, from what they describe: the queue (one statement owned by
// src/jobs/), the database pool, the instance's event streams. A process binds its sources once
// (a test process building several apps reads the last one bound).
import { Gauge } from 'prom-client';
import { poolStatsOf, type Db } from '../db/database.js';
import { JOB_KINDS } from '../jobs/kinds.js';
import { queueStats, type QueueStats } from '../jobs/queue.js';
import type { EventStreams } from '../stream/hub.js';
import { registry } from './registry.js';

export interface MetricSources {
  db: Db;
  streams?: EventStreams | undefined;
}

let sources: MetricSources | undefined;

// The three queue gauges of one scrape share one read: their collects start together.
let reading: Promise<QueueStats[]> | undefined;
function readQueue(): Promise<QueueStats[]> {
  if (!sources) return Promise.resolve([]);
  reading ??= queueStats(sources.db).finally(() => (reading = undefined));
  return reading;
}

/**
 * Sets `gauge` per registered kind from the queue (0 for a kind with no job); a queue outside the
 * registry (the tests', the bench's) is left out, so the label values stay the kinds.
 */
async function setPerKind(gauge: Gauge<'kind'>, value: (stats: QueueStats) => number): Promise<void> {
  let stats: QueueStats[];
  try {
    stats = await readQueue();
  } catch {
    // The database is away: the scrape still answers (the pool and process metrics say why), without the queue's series.
    gauge.reset();
    return;
  }
  for (const kind of JOB_KINDS) {
    const found = stats.find((s) => s.kind === kind);
    gauge.set({ kind }, found ? value(found) : 0);
  }
}

new Gauge({
  name: 'sf_jobs_queued',
  help: 'Jobs in the queue by kind: due, scheduled for later, and running.',
  labelNames: ['kind'],
  // Every instance reads the same table: a cluster reports it once, not summed over its workers.
  aggregator: 'max',
  registers: [registry],
  collect() {
    return setPerKind(this, (s) => s.queued);
  },
});

new Gauge({
  name: 'sf_jobs_due',
  help: 'Jobs due now and not running, by kind: the backlog.',
  labelNames: ['kind'],
  aggregator: 'max',
  registers: [registry],
  collect() {
    return setPerKind(this, (s) => s.due);
  },
});

new Gauge({
  name: 'sf_jobs_oldest_due_age_seconds',
  help: 'How long the oldest job due and not running has been due, by kind (0 when none is): the queue lag.',
  labelNames: ['kind'],
  aggregator: 'max',
  registers: [registry],
  collect() {
    return setPerKind(this, (s) => s.oldestDueAgeSeconds);
  },
});

new Gauge({
  name: 'sf_event_streams_open',
  help: 'Event streams (GET /v1/events/stream) open now on this instance.',
  registers: [registry],
  collect() {
    this.set(sources?.streams?.size() ?? 0);
  },
});

// Only on PostgreSQL (bindMetricSources registers them): the embedded database has no pool, one in-process connection.
const poolGauges = [
  new Gauge({
    name: 'sf_db_pool_connections_in_use',
    help: 'PostgreSQL connections of the pool checked out now.',
    registers: [],
    collect() {
      this.set(sources ? (poolStatsOf(sources.db)?.inUse ?? 0) : 0);
    },
  }),
  new Gauge({
    name: 'sf_db_pool_connections_idle',
    help: 'PostgreSQL connections of the pool open and idle now.',
    registers: [],
    collect() {
      this.set(sources ? (poolStatsOf(sources.db)?.idle ?? 0) : 0);
    },
  }),
  new Gauge({
    name: 'sf_db_pool_waiting',
    help: 'Queries waiting for a pooled PostgreSQL connection now (the pool is full).',
    registers: [],
    collect() {
      this.set(sources ? (poolStatsOf(sources.db)?.waiting ?? 0) : 0);
    },
  }),
];

/** Makes the scrape-time gauges read `next`'s queue, pool and streams. */
export function bindMetricSources(next: MetricSources): void {
  sources = next;
  const pooled = poolStatsOf(next.db) !== undefined;
  for (const gauge of poolGauges) {
    const { name } = gauge as unknown as { name: string };
    const registered = registry.getSingleMetric(name) !== undefined;
    if (pooled && !registered) registry.registerMetric(gauge);
    if (!pooled && registered) registry.removeSingleMetric(name);
  }
}
