// GET /metrics: Prometheus' text format, read by a strict parser, whose counters move as the test
// drives requests, a failing webhook endpoint, an automation and a queue backlog; METRICS_TOKEN;
// label values bounded (operationIds, route templates, kinds, outcomes: never an id or a raw path).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations } from '../src/contract.js';
import { JOB_KINDS } from '../src/jobs/kinds.js';
import { enqueue } from '../src/jobs/queue.js';
import { buildHuman, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { createAutomation, refunds, sandboxInbound, stageId } from './helpers/automations.js';
import { waitFor } from './helpers/processes.js';
import { parseExposition, sampleValue, type Family } from './helpers/prometheus.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

let server: TestServer;
let receiver: WebhookReceiver;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  // Its workers take every job of their database, and the queue gauges count every job in it: one of its own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { webhookRetryDelaysMs: [50], jobPollMs: 100 } });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  await own?.drop();
});

async function scrape(target: Pick<TestServer, 'baseUrl'> = server, headers: Record<string, string> = {}): Promise<Map<string, Family>> {
  const res = await fetch(`${target.baseUrl}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return parseExposition(await res.text());
}

/** Waits until `name{labels}` reaches at least `atLeast`, scraping again and again. */
async function waitForSample(name: string, labels: Record<string, string>, atLeast: number): Promise<Map<string, Family>> {
  let last: Map<string, Family> | undefined;
  await waitFor(`${name}${JSON.stringify(labels)} >= ${atLeast}`, async () => {
    last = await scrape();
    return sampleValue(last, name, labels) >= atLeast;
  });
  return last!;
}

const UUID_ANYWHERE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

describe('GET /metrics', () => {
  it('when scraped, then it is a valid exposition with the service metrics, each with HELP and TYPE, and Node process metrics', async () => {
    const families = await scrape();

    const ours = [...families.values()].filter((f) => f.name.startsWith('sf_'));
    expect(Object.fromEntries(ours.map((f) => [f.name, f.type]))).toEqual({
      sf_http_requests_total: 'counter',
      sf_http_request_duration_seconds: 'histogram',
      sf_job_outcomes_total: 'counter',
      sf_webhook_attempts_total: 'counter',
      sf_automation_runs_total: 'counter',
      sf_automations_inline_total: 'counter',
      sf_media_fetches_total: 'counter',
      sf_jobs_queued: 'gauge',
      sf_jobs_due: 'gauge',
      sf_jobs_oldest_due_age_seconds: 'gauge',
      sf_event_streams_open: 'gauge',
      ...(databaseUrl && { sf_db_pool_connections_in_use: 'gauge', sf_db_pool_connections_idle: 'gauge', sf_db_pool_waiting: 'gauge' }),
    });
    for (const f of ours) expect(f.help, f.name).toMatch(/\w/);
    // Every registered kind is reported, a queue without jobs as 0.
    expect(
      families
        .get('sf_jobs_queued')!
        .samples.map((s) => s.labels.kind)
        .sort(),
    ).toEqual([...JOB_KINDS].sort());
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      expect(families.has(name), name).toBe(true);
    }
  });

  it('when requests are answered, then they are counted and timed by operationId or route template and status, never by raw path', async () => {
    const ws = await createWorkspace(server);
    const before = await scrape();
    const agent = await ws.api.POST('/agents', { body: buildHuman() });
    expect(agent.response.status).toBe(201);

    for (let i = 0; i < 3; i++) expect((await ws.api.GET('/agents')).response.status).toBe(200);
    expect((await ws.api.GET('/agents/{id}', { params: { path: { id: agent.data!.id } } })).response.status).toBe(200);
    expect((await request(server, 'GET', '/v1/agents')).status).toBe(401);
    expect((await request(server, 'GET', `/v1/nothing-here/${randomUUID()}`, { apiKey: ws.apiKey })).status).toBe(404);
    expect((await request(server, 'GET', `/no/such/${randomUUID()}`)).status).toBe(404);
    expect((await request(server, 'GET', '/healthz')).status).toBe(200);

    const after = await scrape();
    const moved = (labels: Record<string, string>): number =>
      sampleValue(after, 'sf_http_requests_total', labels) - sampleValue(before, 'sf_http_requests_total', labels);
    expect({
      created: moved({ operation: 'createAgent', status: '201' }),
      listed: moved({ operation: 'listAgents', status: '200' }),
      read: moved({ operation: 'getAgent', status: '200' }),
      unauthorized: moved({ operation: 'listAgents', status: '401' }),
      unmatched: moved({ operation: 'unmatched', status: '404' }),
      health: moved({ operation: '/healthz', status: '200' }),
    }).toEqual({ created: 1, listed: 3, read: 1, unauthorized: 1, unmatched: 2, health: 1 });
    const timed = (labels: Record<string, string>, m: Map<string, Family>): number => sampleValue(m, 'sf_http_request_duration_seconds_count', labels);
    expect(timed({ operation: 'listAgents', status_class: '2xx' }, after) - timed({ operation: 'listAgents', status_class: '2xx' }, before)).toBe(3);
    expect(sampleValue(after, 'sf_http_request_duration_seconds_sum', { operation: 'listAgents', status_class: '2xx' })).toBeGreaterThan(0);
  });

  it('when a webhook endpoint keeps failing, then its attempts count as retrying, then failed', async () => {
    const ws = await createWorkspace(server);
    receiver.answer(() => ({ status: 500 }));
    const before = await scrape();
    const { response } = await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}/failing`, events: ['contact.created'] } });
    expect(response.status).toBe(201);

    expect((await ws.api.POST('/contacts', { body: { name: 'Bia', phone: '+5511987650001' } })).response.status).toBe(201);

    // One retry is configured (WEBHOOK_RETRY_DELAYS=0.05): the first attempt is retried, the second fails the delivery.
    await receiver.waitFor(2, '/failing');
    const after = await waitForSample(
      'sf_webhook_attempts_total',
      { outcome: 'failed' },
      sampleValue(before, 'sf_webhook_attempts_total', { outcome: 'failed' }) + 1,
    );
    const moved = (outcome: string): number =>
      sampleValue(after, 'sf_webhook_attempts_total', { outcome }) - sampleValue(before, 'sf_webhook_attempts_total', { outcome });
    expect({ retrying: moved('retrying'), failed: moved('failed'), succeeded: moved('succeeded') }).toEqual({ retrying: 1, failed: 1, succeeded: 0 });
    expect(sampleValue(after, 'sf_job_outcomes_total', { kind: 'webhook-delivery', outcome: 'done' })).toBeGreaterThanOrEqual(2);
    receiver.answer(undefined);
  });

  it('when an automation runs, then its run is counted by status', async () => {
    const ws: TestWorkspace = await createWorkspace(server);
    await createAutomation(ws, refunds(await stageId(ws, 'Em atendimento')));
    const scraped = await scrape();
    const before = sampleValue(scraped, 'sf_automation_runs_total', { status: 'succeeded' });
    const jobsBefore = sampleValue(scraped, 'sf_job_outcomes_total', { kind: 'automation-event', outcome: 'done' });
    const inlineBefore = sampleValue(scraped, 'sf_automations_inline_total', { outcome: 'inline' });

    await sandboxInbound(ws, 'Quero o reembolso do pedido', '+5511987650002');

    await waitForSample('sf_automation_runs_total', { status: 'succeeded' }, before + 1);
    // A customer's message runs its automations in its own transaction: no job is spent on it.
    const after = await scrape();
    expect(sampleValue(after, 'sf_job_outcomes_total', { kind: 'automation-event', outcome: 'done' })).toBe(jobsBefore);
    expect(sampleValue(after, 'sf_automations_inline_total', { outcome: 'inline' })).toBe(inlineBefore + 1);
  });

  it('when jobs pile up that nobody runs, then the queue gauges show the backlog and how long its oldest has waited', async () => {
    // No worker runs ai-reply jobs here (no AI_BASE_URL): due an hour ago, they stay.
    const ws = await createWorkspace(server);
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (let i = 0; i < 3; i++) {
      await enqueue(server.db, 'ai-reply', { threadId: randomUUID(), messageId: randomUUID() }, { workspaceId: ws.workspaceId, runAt: hourAgo });
    }
    await enqueue(
      server.db,
      'ai-reply',
      { threadId: randomUUID(), messageId: randomUUID() },
      { workspaceId: ws.workspaceId, runAt: new Date(Date.now() + 3_600_000) },
    );

    const families = await scrape();

    expect(sampleValue(families, 'sf_jobs_queued', { kind: 'ai-reply' })).toBe(4);
    expect(sampleValue(families, 'sf_jobs_due', { kind: 'ai-reply' })).toBe(3);
    expect(sampleValue(families, 'sf_jobs_oldest_due_age_seconds', { kind: 'ai-reply' })).toBeGreaterThanOrEqual(3_600);
    expect(sampleValue(families, 'sf_jobs_oldest_due_age_seconds', { kind: 'media-delete' })).toBe(0);
  });

  it('when every sample is read, then no label value is an id, a workspace or a raw path', async () => {
    const ws = await createWorkspace(server);
    await request(server, 'GET', `/v1/agents/${randomUUID()}`, { apiKey: ws.apiKey });
    await request(server, 'GET', `/v1/contacts?q=${randomUUID()}`, { apiKey: ws.apiKey });
    await request(server, 'GET', `/docs/assets/${randomUUID()}.js`);

    const families = await scrape();

    const operations = new Set([
      ...contractOperations.map((op) => op.operationId),
      ...['verifyMetaWebhook', 'receiveMetaWebhook', '/healthz', '/readyz', '/openapi.json', '/openapi.yaml', '/metrics', '/docs', '/docs/*', 'unmatched'],
    ]);
    for (const family of families.values()) {
      for (const sample of family.samples) {
        for (const [label, value] of Object.entries(sample.labels)) {
          expect(value, `${sample.name}{${label}}`).not.toMatch(UUID_ANYWHERE);
          expect(value, `${sample.name}{${label}}`).not.toContain(ws.workspaceId);
          if (label === 'operation') expect(operations.has(value), value).toBe(true);
          if (label === 'status' && sample.name === 'sf_http_requests_total') expect(value).toMatch(/^\d{3}$/);
          if (label === 'kind' && sample.name.startsWith('sf_')) expect([...JOB_KINDS, 'other']).toContain(value);
        }
      }
    }
  });
});

describe('GET /metrics with METRICS_TOKEN', () => {
  let guarded: TestServer;
  const token = `t-${randomUUID()}`;
  beforeAll(async () => {
    guarded = await startServer({ config: { metricsToken: token } });
  });
  afterAll(() => guarded.close());

  it('when the Bearer token is missing or wrong, then 401 in the error shape; when it is right, then the metrics', async () => {
    const missing = await request(guarded, 'GET', '/metrics');
    const wrong = await request(guarded, 'GET', '/metrics', { headers: { authorization: 'Bearer nope' } });

    for (const res of [missing, wrong]) {
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(res.body).toEqual({
        error: { code: 'unauthorized', message: 'Missing or invalid metrics token (METRICS_TOKEN).', requestId: res.headers.get('x-request-id') },
      });
    }
    expect((await scrape(guarded, { authorization: `Bearer ${token}` })).has('sf_http_requests_total')).toBe(true);
  });
});

describe('METRICS_ENABLED=false', () => {
  it('when metrics are off, then /metrics is an unknown path', async () => {
    const off = await startServer({ config: { metricsEnabled: false } });
    try {
      const res = await request(off, 'GET', '/metrics');
      expect(res.status).toBe(404);
    } finally {
      await off.close();
    }
  });
});
