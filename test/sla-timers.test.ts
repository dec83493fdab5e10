// SLA timers added without a NOTIFY (issue 37: warnings and breaches within 5 s of their moment): a timer due minutes after its clock
// started wakes no worker when it is added (sla/timers.ts timerQueries, jobs/queue.ts wakeFor); the
// workers' claims find it and sleep no longer than its due time, so sla.breached is still recorded
// within 5 s of it, with the workers polling as seldom as JOB_POLL_MS allows (60 s). Waits the
// minutes of wall clock that takes: in the slow tier.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createWorkspace } from './helpers/api.js';
import { sandboxInbound } from './helpers/automations.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';
import { LONGEST_NAP_MS } from '../src/jobs/queue.js';

let server: TestServer;
let own: OwnDatabase | undefined;

beforeAll(async () => {
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { jobPollMs: LONGEST_NAP_MS, retryBaseMs: 20 } });
});
afterAll(async () => {
  await server?.close();
  await own?.drop();
});

it('when a timer falls due three minutes after it was added without a NOTIFY, and the workers poll once a minute, then sla.breached is recorded within 5 s of its due time', async () => {
  const ws = await createWorkspace(server);
  const { response } = await ws.api.POST('/sla-policies', { body: { name: 'Três minutos', targets: { firstResponseMinutes: 3 } } });
  expect(response.status).toBe(201);
  const { threadId } = await sandboxInbound(ws, 'Oi', '+5511911114001');
  const { data: opened } = await ws.api.GET('/threads/{id}', { params: { path: { id: threadId } } });
  const due = Date.parse(opened!.sla!.firstResponseDueAt!);
  expect(due - Date.now()).toBeGreaterThan(2 * LONGEST_NAP_MS);

  const breaches = async () =>
    (await sql<{ created_at: Date }>`select created_at from events where workspace_id = ${ws.workspaceId} and type = 'sla.breached'`.execute(server.db)).rows;
  await waitFor('the breach', async () => (await breaches()).length > 0, due - Date.now() + 10_000);
  const [breach] = await breaches();
  expect(breach!.created_at.getTime()).toBeGreaterThanOrEqual(due);
  expect(breach!.created_at.getTime() - due).toBeLessThanOrEqual(5_000);
}, 240_000);
