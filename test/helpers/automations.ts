// Automations as the tests write them: the README's worked refund example, a stage's id by name, an
// automation created and a customer's message that may trigger it; their runs, the thread and the
// events read back; queued runs run as a worker runs them.
import { expect } from 'vitest';
import type { components } from '../../generated/api.js';
import { runEventAutomations } from '../../src/automations/engine.js';
import { claimJobs, type Job } from '../../src/jobs/queue.js';
import type { TestWorkspace } from './api.js';
import type { TestServer } from './server.js';

type Schemas = components['schemas'];

/** The automation's runs, newest first (one page of 100). */
export async function runsOf(ws: TestWorkspace, automationId: string): Promise<Schemas['AutomationRun'][]> {
  const { data, response } = await ws.api.GET('/automations/{id}/runs', { params: { path: { id: automationId }, query: { limit: 100 } } });
  expect(response.status).toBe(200);
  return data!.data;
}

export async function thread(ws: TestWorkspace, id: string): Promise<Schemas['Thread']> {
  const { data } = await ws.api.GET('/threads/{id}', { params: { path: { id } } });
  return data!;
}

/** The workspace's events of `type`, newest first (one page of 100). */
export async function events(ws: TestWorkspace, type: Schemas['EventType']): Promise<Schemas['Event'][]> {
  const { data } = await ws.api.GET('/events', { params: { query: { type, limit: 100 } } });
  return data!.data;
}

/** Runs the server's queued automation-event jobs one by one, in the queue's order, as a worker does (a server without workers); their triggers, in order. */
export async function runQueuedInOrder(server: Pick<TestServer, 'db'>): Promise<string[]> {
  const ran: string[] = [];
  for (;;) {
    const { jobs } = await claimJobs(server.db, { queue: 'automation-event', workerId: 'test', limit: 1, leaseMs: 60_000 });
    if (jobs.length === 0) return ran;
    const job = jobs[0] as Job<'automation-event'>;
    await runEventAutomations(server.db, job);
    ran.push(job.payload.trigger);
  }
}

/** An automation created (201, else the test fails with the error's body). */
export async function createAutomation(ws: TestWorkspace, body: components['schemas']['AutomationCreate']): Promise<components['schemas']['Automation']> {
  const { data, response, error } = await ws.api.POST('/automations', { body });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!;
}

/** A customer's message on the workspace's sandbox channel: its id and its thread's. */
export async function sandboxInbound(ws: TestWorkspace, content: string, from = '+5511987654321'): Promise<{ threadId: string; messageId: string }> {
  const { data, response } = await ws.api.POST('/channels/{id}/sandbox/inbound', { params: { path: { id: ws.channels[0]!.id } }, body: { from, content } });
  expect(response.status).toBe(201);
  return { threadId: data!.threadId, messageId: data!.id };
}

/** The id of the workspace's stage named `name` (the funnel starts with Novo, Em atendimento, ...). */
export async function stageId(ws: TestWorkspace, name: string): Promise<string> {
  const { data } = await ws.api.GET('/stages');
  return data!.data.find((stage) => stage.name === name)!.id;
}

/** The README's first worked example: a customer writing about a refund moves to `stage`, labelled reembolso. */
export const refunds = (stage: string): components['schemas']['AutomationCreate'] => ({
  name: 'Pedidos de reembolso',
  trigger: { event: 'message.received' },
  conditions: {
    any: [
      { field: 'message.content', operator: 'contains', value: 'reembolso' },
      { field: 'message.content', operator: 'contains', value: 'estorno' },
    ],
  },
  actions: [
    { type: 'move_stage', stageId: stage },
    { type: 'add_labels', target: 'thread', labels: ['reembolso'] },
  ],
});

/**
 * The largest automation of the probe's shape within `bytes` (the bound by default): `any` of 20
 * `in` lists over message.content (accented words, so each is folded), none of which a test
 * message matches; values are lengthened to fill more than the lists' 100 items can.
 */
export function maxSizeKeywords(name: string, bytes = 32 * 1024): components['schemas']['AutomationCreate'] {
  const definition = (perList: number, pad: number) => ({
    trigger: { event: 'message.received' as const },
    conditions: {
      any: Array.from({ length: 20 }, (_, c) => ({
        field: 'message.content',
        operator: 'in' as const,
        value: Array.from({ length: perList }, (_, i) => `ação ${c}-${i}${'x'.repeat(pad)}`),
      })),
    },
    actions: [{ type: 'add_labels' as const, target: 'thread' as const, labels: ['palavra'] }],
  });
  const size = (perList: number, pad: number) => Buffer.byteLength(JSON.stringify(definition(perList, pad)));
  let perList = 100;
  while (size(perList, 0) > bytes) perList--;
  const pad = Math.min(480, Math.floor((bytes - size(perList, 0)) / (20 * perList)));
  return { name, ...definition(perList, pad) };
}

/**
 * Polls `/healthz` every 50 ms until `done` resolves; the longest wait for an answer, counted from
 * when the poll was due (a blocked event loop delays the poll's own timer too, so that counts).
 */
export async function longestHealthWait(baseUrl: string, done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => (finished = true));
  let longest = 0;
  let due = performance.now();
  while (!finished) {
    const response = await fetch(`${baseUrl}/healthz`);
    await response.arrayBuffer();
    longest = Math.max(longest, performance.now() - due);
    due = performance.now() + 50;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await done;
  return longest;
}
