// The bounds of automations: max-size automations and a customer message leave the
// event loop free (a /healthz poll answers within 250 ms) and all of them are evaluated; an
// automation over 32 KiB is refused, one stored before the bound is still listed; one root event
// causes at most 25 runs; automations send at most 10 messages to a thread an hour; their own
// messages neither start nor reset a silence; a deleted automation's runs stay readable.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createWorkspace, type TestWorkspace } from './helpers/api.js';
import { createAutomation as create, longestHealthWait, maxSizeKeywords, refunds, stageId, sandboxInbound as inbound } from './helpers/automations.js';
import { sleep, waitFor } from './helpers/processes.js';
import { jobsLeft } from './helpers/queue.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];
type Automation = Schemas['Automation'];
type Run = Schemas['AutomationRun'];

let server: TestServer;
let own: OwnDatabase | undefined;

beforeAll(async () => {
  // Its workers take every job of their database: one of their own (PGlite: each server has its own).
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { jobPollMs: 200, retryBaseMs: 20 } });
});
afterAll(async () => {
  await server?.close();
  await own?.drop();
});

/** Every run on the thread, newest first (page after page). */
async function threadRuns(ws: TestWorkspace, threadId: string): Promise<Run[]> {
  const runs: Run[] = [];
  for (let page = 1; ; page++) {
    const { data, response } = await ws.api.GET('/threads/{id}/automation-runs', { params: { path: { id: threadId }, query: { limit: 100, page } } });
    expect(response.status).toBe(200);
    runs.push(...data!.data);
    if (runs.length >= data!.pagination.total) return runs;
  }
}

async function thread(ws: TestWorkspace, id: string): Promise<Schemas['Thread']> {
  const { data } = await ws.api.GET('/threads/{id}', { params: { path: { id } } });
  return data!;
}

/** The thread's outbound messages, oldest first. */
async function sent(ws: TestWorkspace, threadId: string): Promise<string[]> {
  const { data } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });
  return data!.data.filter((m) => m.direction === 'outbound').map((m) => m.content ?? '');
}

const settled = (ws: TestWorkspace, timeoutMs = 20_000): Promise<void> =>
  waitFor('the automations to run', async () => (await jobsLeft(server.db, ws.workspaceId, 'automation-event')) === 0, timeoutMs);

describe('the event loop', () => {
  // PGlite (the embedded default) runs each query on the process's own event loop: the bound is the server's, on PostgreSQL.
  it.skipIf(!databaseUrl)(
    'when 99 max-size keyword automations and an unconditional one meet a long message, then /healthz answers within 250 ms throughout and the last one runs',
    async () => {
      const ws = await createWorkspace(server);
      // The routes' validators are compiled on their first request (before any automation here): only the automations' work is measured.
      // GET /threads/{id} too, which the wait below polls: its first call compiled its response validator
      // (responses are validated outside production) in 250-380 ms of one hold, the longest wait this test saw.
      const warm = await inbound(ws, 'Oi', '+5511900000000');
      await thread(ws, warm.threadId);
      const heavy: Automation[] = [];
      for (let i = 0; i < 99; i++) heavy.push(await create(ws, maxSizeKeywords(`Palavras ${i}`)));
      await create(ws, { name: 'Visto', trigger: { event: 'message.received' }, actions: [{ type: 'add_labels', target: 'thread', labels: ['visto'] }] });
      await ws.api.POST('/automations/{id}/test', { params: { path: { id: heavy[0]!.id } }, body: { threadId: warm.threadId } });
      // The setup's garbage collected: the event below finds its automations in no cache.
      await waitFor('a quiet event loop', async () => (await longestHealthWait(server.baseUrl, sleep(1_000))) < 100, 30_000);
      const content = 'Não recebi o meu pedido, quero saber da devolução e do estorno. '.repeat(64).slice(0, 4096);

      const { threadId } = await inbound(ws, content);
      const ran = waitFor('the unconditional automation to act', async () => (await thread(ws, threadId)).labels.includes('visto'), 60_000);
      const longest = await longestHealthWait(server.baseUrl, ran);

      expect(longest, 'the longest /healthz wait while the event ran').toBeLessThan(250);
      expect((await thread(ws, threadId)).labels).toEqual(['visto']);
      const dryRuns = (async () => {
        for (const automation of heavy.slice(0, 5)) {
          const { data, response } = await ws.api.POST('/automations/{id}/test', { params: { path: { id: automation.id } }, body: { threadId } });
          expect(response.status).toBe(200);
          expect(data!.matched).toBe(false);
          expect(data!.conditions).toHaveLength(20);
        }
      })();
      expect(await longestHealthWait(server.baseUrl, dryRuns), 'the longest /healthz wait during dry runs').toBeLessThan(250);
    },
    120_000,
  );
});

describe('the size of an automation', () => {
  it('when its trigger, conditions and actions take more than 32 KiB of UTF-8 JSON, then 400 names the limit; at 32 KiB it is stored', async () => {
    const ws = await createWorkspace(server);
    const fits = maxSizeKeywords('Cabe');
    const size = (body: Schemas['AutomationCreate']) =>
      Buffer.byteLength(JSON.stringify({ trigger: body.trigger, conditions: body.conditions, actions: body.actions }));
    const over = maxSizeKeywords('Não cabe', 40 * 1024);
    expect(size(fits)).toBeLessThanOrEqual(32768);
    expect(size(over)).toBeGreaterThan(32768);

    const refused = await ws.api.POST('/automations', { body: over });
    const stored = await create(ws, fits);
    const grown = await ws.api.PATCH('/automations/{id}', { params: { path: { id: stored.id } }, body: { conditions: over.conditions } });

    for (const { response, error } of [refused, grown]) {
      expect(response.status).toBe(400);
      expect(error).toMatchObject({ error: { code: 'validation_error', message: expect.stringContaining('32 KiB') } });
    }
    const { data } = await ws.api.GET('/automations', { params: { query: { limit: 100 } } });
    expect(data!.data.map((a) => a.id)).toEqual([stored.id]);
  });

  it('when automations over the bound were stored before it, then the list still answers them, they do not run (the others do) and the dry run answers 422', async () => {
    const ws = await createWorkspace(server);
    const big = maxSizeKeywords('Antiga', 1024 * 1024);
    const ids = [uuidv7(), uuidv7()];
    for (const [i, id] of ids.entries()) {
      await sql`insert into automations (workspace_id, id, name, enabled, position, trigger, conditions, actions, created_at, updated_at)
                values (${ws.workspaceId}, ${id}, ${big.name}, true, ${i + 1}, ${JSON.stringify(big.trigger)}, ${JSON.stringify(big.conditions)},
                        ${JSON.stringify([{ type: 'add_labels', target: 'thread', labels: ['antiga'] }])}, now(), now())`.execute(server.db);
    }
    await create(ws, { name: 'Visto', trigger: { event: 'message.received' }, actions: [{ type: 'add_labels', target: 'thread', labels: ['visto'] }] });

    const { data, response } = await ws.api.GET('/automations', { params: { query: { limit: 100 } } });
    const { threadId } = await inbound(ws, String((big.conditions!.any![0]!.value as string[])[1]));
    await settled(ws);
    const test = await ws.api.POST('/automations/{id}/test', { params: { path: { id: ids[0]! } }, body: { threadId } });

    expect(response.status).toBe(200);
    expect(data!.data.map((a) => [a.id, a.enabled])).toEqual([...ids.map((id) => [id, true]), [expect.any(String), true]]);
    expect((await thread(ws, threadId)).labels).toEqual(['visto']);
    expect(test.response.status).toBe(422);
    expect(test.error).toMatchObject({ error: { code: 'limit_reached', message: expect.stringContaining('32 KiB') } });
  });
});

describe('fan-out and messages', () => {
  it('when 10 automations answer every message.sent, then one message causes 25 runs and 10 automation messages; the rest are recorded loop_prevented or rate_limited', async () => {
    const ws = await createWorkspace(server);
    for (let i = 0; i < 10; i++) {
      await create(ws, { name: `Eco ${i}`, trigger: { event: 'message.sent' }, actions: [{ type: 'send_message', content: `Eco ${i}` }] });
    }
    const { threadId } = await inbound(ws, 'Oi');
    const opened = await thread(ws, threadId);

    await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá!' } });
    await settled(ws, 30_000);

    const runs = await threadRuns(ws, threadId);
    const acted = runs.filter((r) => r.reason !== 'loop_prevented');
    expect(acted).toHaveLength(25);
    expect(runs.filter((r) => r.reason === 'loop_prevented').length).toBeGreaterThan(0);
    expect((await sent(ws, threadId)).filter((c) => c.startsWith('Eco'))).toHaveLength(10);
    const limited = acted.flatMap((r) => r.actions).filter((a) => a.status === 'skipped');
    expect(limited).toHaveLength(15);
    expect(limited.every((a) => a.type === 'send_message' && a.reason === 'rate_limited')).toBe(true);
    expect(acted.every((r) => r.status === 'succeeded')).toBe(true);
  }, 60_000);

  it('when automations would send 12 messages to a thread within an hour, then 10 go and 2 actions are skipped rate_limited', async () => {
    const ws = await createWorkspace(server);
    const six = Array.from({ length: 6 }, (_, i) => ({ type: 'send_message' as const, content: `Aviso ${i}` }));
    await create(ws, { name: 'Avisos A', trigger: { event: 'message.received' }, actions: six });
    const b = await create(ws, { name: 'Avisos B', trigger: { event: 'message.received' }, actions: six });

    const { threadId } = await inbound(ws, 'Oi');
    await settled(ws);

    expect(await sent(ws, threadId)).toHaveLength(10);
    const runB = (await threadRuns(ws, threadId)).find((r) => r.automationId === b.id)!;
    expect(runB.status).toBe('succeeded');
    expect(runB.actions.map((a) => [a.status, a.reason])).toEqual([
      ...Array(4).fill(['succeeded', null]),
      ['skipped', 'rate_limited'],
      ['skipped', 'rate_limited'],
    ]);
  });
});

describe('thread.idle and automations’ messages', () => {
  async function timers(ws: TestWorkspace): Promise<Array<{ automationId: string; messageId: string }>> {
    const rows = await server.db
      .selectFrom('jobs')
      .select(['payload'])
      .where('workspace_id', '=', ws.workspaceId)
      .where('queue', '=', 'automation-idle')
      .execute();
    return rows.map((r) => {
      const { automationId, messageId } = r.payload as { automationId: string; messageId: string };
      return { automationId, messageId };
    });
  }

  async function travel(ws: TestWorkspace, threadId: string, ms: number): Promise<void> {
    await sql`update messages set created_at = created_at - ${ms} * interval '1 millisecond'
               where workspace_id = ${ws.workspaceId} and thread_id = ${threadId}`.execute(server.db);
    await sql`update jobs set run_at = run_at - ${ms} * interval '1 millisecond'
               where workspace_id = ${ws.workspaceId} and queue = 'automation-idle'`.execute(server.db);
    await sql`select pg_notify('sf_jobs', 'automation-idle')`.execute(server.db);
  }

  it('when a reminder fires on a silence, then its own message starts no new silence: one reminder, no timer left', async () => {
    const ws = await createWorkspace(server);
    const reminder = await create(ws, {
      name: 'Lembrete',
      trigger: { event: 'thread.idle', minutes: 1, waitingOn: 'customer' },
      actions: [{ type: 'send_message', content: 'Ainda está aí?' }],
    });
    const { threadId } = await inbound(ws, 'Oi', '+5511911112001');
    const opened = await thread(ws, threadId);
    await ws.api.POST('/messages', { body: { contactId: opened.contactId, channelId: opened.channelId, content: 'Olá! Em que podemos ajudar?' } });

    await travel(ws, threadId, 61_000);
    await waitFor('the reminder', async () => (await sent(ws, threadId)).includes('Ainda está aí?'), 10_000);
    await waitFor('the timer to end', async () => (await timers(ws)).length === 0, 5_000);

    expect(await sent(ws, threadId)).toEqual(['Olá! Em que podemos ajudar?', 'Ainda está aí?']);
    expect((await threadRuns(ws, threadId)).map((r) => [r.automationId, r.status])).toEqual([[reminder.id, 'succeeded']]);
  });

  it('when an automation answers the customer at once, then the silence waiting on the team is neither ended nor replaced, and fires', async () => {
    const ws = await createWorkspace(server);
    await create(ws, { name: 'Recebido', trigger: { event: 'message.received' }, actions: [{ type: 'send_message', content: 'Recebemos sua mensagem.' }] });
    const nudge = await create(ws, {
      name: 'Avisar a equipe',
      trigger: { event: 'thread.idle', minutes: 30, waitingOn: 'agent' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['esperando'] }],
    });

    const { threadId, messageId } = await inbound(ws, 'Quero saber do meu pedido', '+5511911112002');
    await settled(ws);

    expect(await sent(ws, threadId)).toEqual(['Recebemos sua mensagem.']);
    expect(await timers(ws)).toEqual([{ automationId: nudge.id, messageId }]);
    await travel(ws, threadId, 31 * 60_000);
    await waitFor('the team to be nudged', async () => (await thread(ws, threadId)).labels.includes('esperando'), 10_000);
  });
});

describe('runs of a deleted automation', () => {
  it('when an automation is deleted, then its runs stay listed on the thread and under its id', async () => {
    const ws = await createWorkspace(server);
    const automation = await create(ws, refunds(await stageId(ws, 'Em atendimento')));
    const { threadId } = await inbound(ws, 'Quero um reembolso');
    await settled(ws);
    const before = await threadRuns(ws, threadId);

    const deleted = await ws.api.DELETE('/automations/{id}', { params: { path: { id: automation.id } } });
    const { data, response } = await ws.api.GET('/automations/{id}/runs', { params: { path: { id: automation.id } } });

    expect(deleted.response.status).toBe(204);
    expect(before).toMatchObject([{ automationId: automation.id, threadId, status: 'succeeded' }]);
    expect(await threadRuns(ws, threadId)).toEqual(before);
    expect(response.status).toBe(200);
    expect(data!.data).toEqual(before);
  });
});
