// GET /metrics as operators run the service (`node src/server.ts`, or the build): a cluster's workers
// summed into one exposition, on the public port (a worker asks the primary) or on METRICS_PORT's
// server of its own (the primary's), behind METRICS_TOKEN.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { freePort } from './helpers/processes.js';
import { parseExposition, sampleValue } from './helpers/prometheus.js';
import { databaseUrl, openDatabase, ownDatabase, redisUrl, type OwnDatabase } from './helpers/server.js';
import { Service, START_MS } from './helpers/service.js';

/** One GET on a connection of its own, so the primary hands each to the next worker. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

const TOKEN = 'metrics-token-of-the-test-0123456789';

describe.skipIf(!databaseUrl || !redisUrl)('GET /metrics of WEB_CONCURRENCY=2 (needs PostgreSQL and Redis)', () => {
  let own: OwnDatabase;
  let db: Db;
  let apiKey: string;
  const services: Service[] = [];
  beforeAll(async () => {
    own = await ownDatabase();
    db = await openDatabase(own.url);
    ({ apiKey } = await provision(db, { plan: 'enterprise', scopes: [...SCOPES] }));
  });
  afterAll(async () => {
    for (const service of services) await service.kill();
    await db?.destroy();
    await own?.drop();
  });

  it(
    "when METRICS_PORT is set, then the primary serves the workers' sum there, behind METRICS_TOKEN, and the public port does not serve it",
    async () => {
      const [port, metricsPort] = [await freePort(), await freePort()];
      const service = new Service(port, {
        WEB_CONCURRENCY: '2',
        DATABASE_URL: own.url,
        REDIS_URL: redisUrl!,
        METRICS_PORT: String(metricsPort),
        METRICS_TOKEN: TOKEN,
      });
      services.push(service);
      await service.waitForListening(2);

      for (let i = 0; i < 10; i++) expect((await get(port, '/v1/agents', { authorization: `Bearer ${apiKey}` })).status).toBe(200);
      const publicly = await get(port, '/metrics');
      const missing = await get(metricsPort, '/metrics');
      const elsewhere = await get(metricsPort, '/v1/agents', { authorization: `Bearer ${TOKEN}` });
      const scraped = await get(metricsPort, '/metrics', { authorization: `Bearer ${TOKEN}` });

      expect([publicly.status, missing.status, elsewhere.status, scraped.status]).toEqual([404, 401, 404, 200]);
      expect(JSON.parse(missing.text)).toEqual({
        error: { code: 'unauthorized', message: 'Missing or invalid metrics token (METRICS_TOKEN).', requestId: missing.headers['x-request-id'] },
      });
      const families = parseExposition(scraped.text);
      // Ten requests served by turns by two workers: only their sum says ten.
      expect(sampleValue(families, 'sf_http_requests_total', { operation: 'listAgents', status: '200' })).toBe(10);
      expect(sampleValue(families, 'sf_jobs_queued', { kind: 'webhook-delivery' })).toBe(0);
      expect(families.has('process_cpu_user_seconds_total')).toBe(true);
    },
    START_MS + 30_000,
  );

  it(
    'when METRICS_PORT is not set, then a worker answers GET /metrics on the public port with the sum of both',
    async () => {
      const port = await freePort();
      const service = new Service(port, { WEB_CONCURRENCY: '2', DATABASE_URL: own.url, REDIS_URL: redisUrl! });
      services.push(service);
      await service.waitForListening(2);

      for (let i = 0; i < 10; i++) expect((await get(port, '/v1/agents', { authorization: `Bearer ${apiKey}` })).status).toBe(200);
      const first = await get(port, '/metrics');
      const second = await get(port, '/metrics');

      expect([first.status, second.status]).toEqual([200, 200]);
      // Whichever worker answers, the count is the cluster's.
      for (const scraped of [first, second]) {
        expect(sampleValue(parseExposition(scraped.text), 'sf_http_requests_total', { operation: 'listAgents', status: '200' })).toBe(10);
      }
    },
    START_MS + 30_000,
  );
});
