// A customer's message runs its automations inline, in the inbound's own transaction
// (src/automations/inline.ts): on a server without workers, so that nothing but the inbound itself
// can have run them. Its effects are there when the webhook is answered, with no job left; a run
// that fails is undone and queued for the worker, the message kept; a run of the thread still
// queued keeps the message's run behind it; the loop guard still ends a chain begun inline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { metrics } from '../src/metrics/registry.js';
import { buildPhone, createWorkspace } from './helpers/api.js';
import { createAutomation as create, events, refunds, runQueuedInOrder, runsOf, stageId, sandboxInbound as inbound, thread } from './helpers/automations.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { whatsappDelivery, whatsappText } from './helpers/graph.js';
import { jobsLeft } from './helpers/queue.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];

let quiet: TestServer;
let own: OwnDatabase | undefined;

/** How many customers' messages ran their automations with `outcome` so far (this process's counter). */
async function inlineCount(outcome: 'inline' | 'behind' | 'failed'): Promise<number> {
  return (await metrics.automationsInline.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

/** How many automation runs this process counted with `status` so far (sf_automation_runs_total). */
async function runsCounted(status: 'succeeded' | 'failed'): Promise<number> {
  return (await metrics.automationRuns.get()).values.find((v) => v.labels.status === status)?.value ?? 0;
}

beforeAll(async () => {
  // No workers: the test runs the queued jobs itself (runQueuedInOrder), as a worker would.
  own = databaseUrl ? await ownDatabase() : undefined;
  quiet = await startServer({ databaseUrl: own?.url });
});
afterAll(async () => {
  await quiet?.close();
  await own?.drop();
});

describe('a customer’s message runs its automations inline', () => {
  it('when Meta delivers a message an automation matches, then its stage and label are on the thread when the webhook is answered, its run recorded and no job left', async () => {
    const ws = await createWorkspace(quiet);
    const emAtendimento = await stageId(ws, 'Em atendimento');
    for (let i = 0; i < 3; i++) {
      await create(ws, {
        name: `Nunca ${i}`,
        trigger: { event: 'message.received' },
        conditions: { any: [{ field: 'message.content', operator: 'contains', value: `zzz${i}` }] },
        actions: [{ type: 'add_labels', target: 'thread', labels: [`n${i}`] }],
      });
    }
    const automation = await create(ws, refunds(emAtendimento));
    const meta = await createMetaChannel(ws, 'whatsapp');

    const delivery = whatsappDelivery(meta.externalId, whatsappText(buildPhone().slice(1), 'Quero o reembolso do pedido', 'Rita'));
    const res = await postWebhook(quiet, meta.channel.id, delivery, { appSecret: meta.appSecret });

    expect(res.status).toBe(200);
    const [created] = await events(ws, 'message.created');
    const { threadId } = created!.data.object as Schemas['Message'];
    expect(await thread(ws, threadId)).toMatchObject({ stageId: emAtendimento, labels: ['reembolso'] });
    expect((await runsOf(ws, automation.id)).map((r) => [r.eventId, r.threadId, r.status, r.actions.map((a) => a.status)])).toEqual([
      [created!.id, threadId, 'succeeded', ['succeeded', 'succeeded']],
    ]);
    const [updated] = await events(ws, 'thread.updated');
    expect(updated!.data.actor).toEqual({ type: 'automation', id: automation.id });
    expect(await events(ws, 'automation.run')).toHaveLength(1);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(0);
  });

  it('when no automation matches, then nothing is recorded and no job is left', async () => {
    const ws = await createWorkspace(quiet);
    const automation = await create(ws, refunds(await stageId(ws, 'Em atendimento')));

    const { threadId } = await inbound(ws, 'Bom dia', buildPhone());

    expect(await thread(ws, threadId)).toMatchObject({ labels: [] });
    expect(await runsOf(ws, automation.id)).toEqual([]);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(0);
  });

  it('when an action fails, then the message is stored with nothing of the run, and the worker runs it afterwards: the action failed alone', async () => {
    const ws = await createWorkspace(quiet);
    const { data: gone } = await ws.api.POST('/stages', { body: { name: 'Temporária' } });
    const automation = await create(ws, {
      name: 'Etapa apagada',
      trigger: { event: 'message.received' },
      actions: [
        { type: 'add_labels', target: 'thread', labels: ['antes'] },
        { type: 'set_attribute', key: 'origem', value: 'whatsapp' },
        { type: 'move_stage', stageId: gone!.id },
      ],
    });
    expect((await ws.api.DELETE('/stages/{id}', { params: { path: { id: gone!.id } } })).response.status).toBe(204);

    const failedBefore = await inlineCount('failed');

    const { threadId, messageId } = await inbound(ws, 'Oi', buildPhone());

    const { data: messages } = await ws.api.GET('/threads/{threadId}/messages', { params: { path: { threadId } } });
    expect(messages!.data.map((m) => m.id)).toEqual([messageId]);
    const contactId = (await thread(ws, threadId)).contactId;
    expect(await thread(ws, threadId)).toMatchObject({ labels: [] });
    expect(await runsOf(ws, automation.id)).toEqual([]);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(1);
    expect(await inlineCount('failed')).toBe(failedBefore + 1);

    expect(await runQueuedInOrder(quiet)).toEqual(['message.received']);

    const [created] = await events(ws, 'message.created');
    expect((await runsOf(ws, automation.id)).map((r) => [r.eventId, r.status, r.actions.map((a) => [a.type, a.status])])).toEqual([
      [
        created!.id,
        'failed',
        [
          ['add_labels', 'succeeded'],
          ['set_attribute', 'succeeded'],
          ['move_stage', 'failed'],
        ],
      ],
    ]);
    expect(await thread(ws, threadId)).toMatchObject({ labels: ['antes'] });
    const { data: contact } = await ws.api.GET('/contacts/{id}', { params: { path: { id: contactId } } });
    expect(contact!.attributes).toEqual({ origem: 'whatsapp' });
    // Nothing of the inline attempt committed: each change has one event, the worker's.
    expect((await events(ws, 'thread.updated')).map((e) => e.data.actor)).toEqual([{ type: 'automation', id: automation.id }]);
    expect((await events(ws, 'contact.updated')).map((e) => e.data.actor)).toEqual([{ type: 'automation', id: automation.id }]);
  });

  it('when a later automation’s action fails, then each run is counted once in sf_automation_runs_total, by the attempt that committed it', async () => {
    const ws = await createWorkspace(quiet);
    const { data: gone } = await ws.api.POST('/stages', { body: { name: 'Provisória' } });
    const first = await create(ws, {
      name: 'Primeira',
      trigger: { event: 'message.received' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['primeira'] }],
    });
    await create(ws, { name: 'Segunda', trigger: { event: 'message.received' }, actions: [{ type: 'move_stage', stageId: gone!.id }] });
    expect((await ws.api.DELETE('/stages/{id}', { params: { path: { id: gone!.id } } })).response.status).toBe(204);
    const before = { succeeded: await runsCounted('succeeded'), failed: await runsCounted('failed') };

    // Inline, the first run is recorded and the second fails: both rolled back, queued for the worker.
    const { threadId } = await inbound(ws, 'Oi', buildPhone());
    const afterInline = { succeeded: await runsCounted('succeeded'), failed: await runsCounted('failed') };
    // The worker's run goes without savepoints, fails on the second, and goes again with them.
    expect(await runQueuedInOrder(quiet)).toEqual(['message.received']);

    expect(afterInline).toEqual(before);
    expect((await runsOf(ws, first.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect(await thread(ws, threadId)).toMatchObject({ labels: ['primeira'] });
    expect({ succeeded: await runsCounted('succeeded'), failed: await runsCounted('failed') }).toEqual({
      succeeded: before.succeeded + 1,
      failed: before.failed + 1,
    });
  });

  it('when a run of the thread is still queued, then the message’s run waits behind it (not inline), and they run in order', async () => {
    const ws = await createWorkspace(quiet);
    const phone = buildPhone();
    const { threadId } = await inbound(ws, 'Oi', phone);
    const assigned = await create(ws, {
      name: 'Rotulada',
      trigger: { event: 'thread.updated' },
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'urgente' }] },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['vista'] }],
    });
    const received = await create(ws, {
      name: 'Resposta',
      trigger: { event: 'message.received' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['respondida'] }],
    });
    await ws.api.PATCH('/threads/{id}', { params: { path: { id: threadId } }, body: { labels: ['urgente'] } });
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(1);
    const behindBefore = await inlineCount('behind');

    await inbound(ws, 'Alguém aí?', phone);

    // Queued behind the thread.updated run, which has not run yet: nothing of either is done.
    expect(await thread(ws, threadId)).toMatchObject({ labels: ['urgente'] });
    expect(await runsOf(ws, received.id)).toEqual([]);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(2);
    expect(await inlineCount('behind')).toBe(behindBefore + 1);

    expect(await runQueuedInOrder(quiet)).toEqual(['thread.updated', 'message.received', 'thread.updated', 'thread.updated']);

    const first = (await runsOf(ws, assigned.id)).at(-1)!;
    const [second] = await runsOf(ws, received.id);
    expect(first.status).toBe('succeeded');
    expect(second!.status).toBe('succeeded');
    expect(first.createdAt < second!.createdAt).toBe(true);
    // In the order the runs applied them.
    expect((await thread(ws, threadId)).labels).toEqual(['urgente', 'vista', 'respondida']);
  });

  it('when a run begun inline causes events whose automations act again and again, then the loop guard ends the chain', async () => {
    const ws = await createWorkspace(quiet);
    const received = await create(ws, {
      name: 'Primeira',
      trigger: { event: 'message.received' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['a'] }],
    });
    const again = await create(ws, {
      name: 'De novo',
      trigger: { event: 'thread.updated' },
      actions: [{ type: 'add_labels', target: 'thread', labels: ['b'] }],
    });

    const { threadId } = await inbound(ws, 'Oi', buildPhone());

    // The inline run's thread.updated queued its automations' run; its own change queues one more, which the guard stops.
    expect(await runsOf(ws, received.id)).toHaveLength(1);
    expect(await runQueuedInOrder(quiet)).toEqual(['thread.updated', 'thread.updated']);
    expect((await runsOf(ws, again.id)).map((r) => [r.status, r.reason]).reverse()).toEqual([
      ['succeeded', null],
      ['skipped', 'loop_prevented'],
    ]);
    expect((await thread(ws, threadId)).labels).toEqual(['a', 'b']);
    expect(await jobsLeft(quiet.db, ws.workspaceId, 'automation-event')).toBe(0);
  });
});
