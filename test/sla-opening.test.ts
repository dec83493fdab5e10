// A thread's opening under SLA policies (issue 37): when the workspace's first enabled policy has no
// conditions, the policy is chosen before the thread exists and its `sla` is stored with the
// thread's row (one version of it, as without policies); when a condition must see the thread, it is
// chosen on the thread as stored. Either way thread.created and the thread carry the `sla` the
// contract describes. Versions of the rows counted by a trigger on a database of the file's own.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { buildContact, createWorkspace, type TestWorkspace } from './helpers/api.js';
import { sandboxInbound } from './helpers/automations.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Schemas = components['schemas'];

let server: TestServer;
let own: OwnDatabase | undefined;

beforeAll(async () => {
  // Its trigger sees every write of threads: a database of its own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: false });
  await sql`create table test_thread_writes (seq bigserial primary key, thread_id uuid not null, op text not null)`.execute(server.db);
  await sql`create function test_thread_write() returns trigger language plpgsql as $$
              begin insert into test_thread_writes (thread_id, op) values (new.id, lower(tg_op)); return null; end $$`.execute(server.db);
  await sql`create trigger test_thread_writes after insert or update on threads for each row execute function test_thread_write()`.execute(server.db);
});
afterAll(async () => {
  await server?.close();
  await own?.drop();
});

const targets = { firstResponseMinutes: 15, resolutionMinutes: 600 };
const minutesAfter = (iso: string, minutes: number) => new Date(Date.parse(iso) + minutes * 60_000).toISOString();

/** The versions of the thread's row written so far, oldest first ('insert', 'update'). */
async function writesOf(threadId: string): Promise<string[]> {
  const { rows } = await sql<{ op: string }>`select op from test_thread_writes where thread_id = ${threadId} order by seq`.execute(server.db);
  return rows.map((row) => row.op);
}

async function createPolicy(ws: TestWorkspace, body: Schemas['SlaPolicyCreate']): Promise<Schemas['SlaPolicy']> {
  const { data, response } = await ws.api.POST('/sla-policies', { body });
  expect(response.status).toBe(201);
  return data!;
}

async function openByApi(ws: TestWorkspace, labels?: string[]): Promise<Schemas['Thread']> {
  const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
  const { data, response } = await ws.api.POST('/threads', {
    body: { contactId: contact!.id, channelId: ws.channels[0]!.id, ...(labels && { labels }) },
  });
  expect(response.status).toBe(201);
  return data!;
}

/** The `sla` of a thread opened at `createdAt` under `policy` (15-minute first response, 10-hour resolution). */
const activeSla = (policy: Schemas['SlaPolicy'], createdAt: string): Schemas['ThreadSla'] => ({
  policyId: policy.id,
  firstResponseDueAt: minutesAfter(createdAt, 15),
  nextResponseDueAt: null,
  resolutionDueAt: minutesAfter(createdAt, 600),
  status: 'active',
  breached: [],
});

describe('opening a thread under SLA policies', () => {
  it('when the first enabled policy has no conditions, then POST /threads writes the thread once, its sla with it', async () => {
    const ws = await createWorkspace(server);
    const policy = await createPolicy(ws, { name: 'Todas', targets });

    const thread = await openByApi(ws);

    expect(thread.sla).toEqual(activeSla(policy, thread.createdAt));
    expect(await writesOf(thread.id)).toEqual(['insert']);
    const { data: stored } = await ws.api.GET('/threads/{id}', { params: { path: { id: thread.id } } });
    expect(stored!.sla).toEqual(thread.sla);
  });

  it("when the first enabled policy has no conditions, then a new customer's message writes the thread as often as without policies", async () => {
    const bare = await createWorkspace(server);
    const held = await createWorkspace(server);
    const policy = await createPolicy(held, { name: 'Todas', targets });

    const without = await sandboxInbound(bare, 'Oi', '+5511970000001');
    const within = await sandboxInbound(held, 'Oi', '+5511970000002');

    // The opening's insert, then the message's inbound times.
    expect(await writesOf(without.threadId)).toEqual(['insert', 'update']);
    expect(await writesOf(within.threadId)).toEqual(['insert', 'update']);
    const { data: thread } = await held.api.GET('/threads/{id}', { params: { path: { id: within.threadId } } });
    expect(thread!.sla).toEqual(activeSla(policy, thread!.createdAt));
    const { data: created } = await held.api.GET('/events', { params: { query: { type: 'thread.created' } } });
    expect(created!.data.map((event) => (event.data as { object: Schemas['Thread'] }).object.sla)).toEqual([thread!.sla]);
  });

  it('when a policy before the first without conditions has one, then the thread is held to the policy its conditions choose', async () => {
    const ws = await createWorkspace(server);
    const vip = await createPolicy(ws, {
      name: 'VIP',
      conditions: { all: [{ field: 'thread.labels', operator: 'contains', value: 'vip' }] },
      targets,
    });
    const rest = await createPolicy(ws, { name: 'Todas', targets });

    const labelled = await openByApi(ws, ['vip']);
    const plain = await openByApi(ws);

    expect(labelled.sla).toEqual(activeSla(vip, labelled.createdAt));
    expect(plain.sla).toEqual(activeSla(rest, plain.createdAt));
  });

  it('when the workspace has no enabled policy, then the opening writes the thread once and its sla is null', async () => {
    const ws = await createWorkspace(server);
    await createPolicy(ws, { name: 'Desligada', targets, enabled: false });

    const thread = await openByApi(ws);

    expect(thread.sla).toBeNull();
    expect(await writesOf(thread.id)).toEqual(['insert']);
  });
});
