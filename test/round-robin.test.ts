// Round robin through its service function, as the AI handoff and the automations
// call it, read back through the API: the oldest last assignment first, capacity, who is never
// chosen, the no_agent_available entry, a channel's default person, and, on PostgreSQL, many
// assignments at once from several instances never taking anyone over capacity.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { apiKeyActor, type Actor } from '../src/actor.js';
import type { Db } from '../src/db/database.js';
import { AI_UNAVAILABLE } from '../src/ai/chat.js';
import { spec } from '../src/contract.js';
import { assignRoundRobin, NO_AGENT_AVAILABLE } from '../src/services/round-robin.js';
import { buildAgent, buildContact, buildHuman, createWorkspace, UUID, type TestWorkspace } from './helpers/api.js';
import { databaseUrl, openDatabase, startServer, type TestServer } from './helpers/server.js';

type Agent = components['schemas']['Agent'];
type Thread = components['schemas']['Thread'];
type Entry = components['schemas']['ThreadHistoryEntry'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function person(ws: TestWorkspace, overrides: Partial<components['schemas']['AgentCreate']> = {}): Promise<Agent> {
  const { data, response } = await ws.api.POST('/agents', { body: buildHuman(overrides) });
  expect(response.status).toBe(201);
  return data!;
}

/** An open thread of a new contact on the workspace's first channel, with the agent given (if any). */
async function openThread(ws: TestWorkspace, agentId?: string): Promise<Thread> {
  const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
  const { data, response } = await ws.api.POST('/threads', {
    body: { contactId: contact!.id, channelId: ws.channels[0]!.id, ...(agentId && { agentId }) },
  });
  expect(response.status).toBe(201);
  return data!;
}

const keyActor = (ws: TestWorkspace): Actor => apiKeyActor(ws.keyId);

/** One round robin in a transaction of its own, as a caller would run it; the thread's agent after it. */
async function roundRobin(ws: TestWorkspace, threadId: string, reason: string | null = null, db: Db = server.db): Promise<string | null> {
  const row = await db.transaction().execute((trx) => assignRoundRobin(trx, ws.workspaceId, threadId, keyActor(ws), reason));
  if (!row) throw new Error(`no thread ${threadId}`);
  return row.agent_id;
}

async function historyOf(ws: TestWorkspace, id: string): Promise<Entry[]> {
  const { data } = await ws.api.GET('/threads/{id}/history', { params: { path: { id }, query: { limit: 100 } } });
  return data!.data;
}

async function getThread(ws: TestWorkspace, id: string): Promise<Thread> {
  const { data } = await ws.api.GET('/threads/{id}', { params: { path: { id } } });
  return data!;
}

async function close(ws: TestWorkspace, id: string): Promise<void> {
  const { response } = await ws.api.PATCH('/threads/{id}', { params: { path: { id } }, body: { status: 'closed' } });
  expect(response.status).toBe(200);
}

describe('assignRoundRobin', () => {
  it('when three people are online, then threads go to each in turn, never-assigned first by id, and each carries one history entry and one thread.updated', async () => {
    const ws = await createWorkspace(server);
    const people = [await person(ws, { name: 'A' }), await person(ws, { name: 'B' }), await person(ws, { name: 'C' })];
    const byId = people.map((p) => p.id).sort();
    const threads = [];
    for (let i = 0; i < 6; i++) threads.push(await openThread(ws));

    const assigned = [];
    for (const thread of threads) assigned.push(await roundRobin(ws, thread.id, 'triagem'));

    expect(assigned).toEqual([...byId, ...byId]);
    const history = await historyOf(ws, threads[0]!.id);
    expect(history.filter((e) => e.field === 'agentId')).toEqual([
      {
        id: expect.stringMatching(UUID),
        field: 'agentId',
        from: null,
        to: byId[0],
        actor: { type: 'api_key', id: ws.keyId },
        reason: 'triagem',
        createdAt: expect.any(String),
      },
    ]);
    const { data: events } = await ws.api.GET('/events', { params: { query: { type: 'thread.updated', limit: 100 } } });
    expect(events!.data).toHaveLength(6);
    expect(events!.data[0]!.data.object).toEqual(await getThread(ws, threads[5]!.id));
  });

  it('when someone comes online later, then never having been assigned puts them first, and the rest continue from the oldest assignment', async () => {
    const ws = await createWorkspace(server);
    const a = await person(ws, { name: 'A' });
    const b = await person(ws, { name: 'B' });
    const late = await person(ws, { name: 'Late', availability: 'offline' });
    const first = [await roundRobin(ws, (await openThread(ws)).id), await roundRobin(ws, (await openThread(ws)).id)];
    await ws.api.PATCH('/agents/{id}', { params: { path: { id: late.id } }, body: { availability: 'online' } });

    const next = [];
    for (let i = 0; i < 3; i++) next.push(await roundRobin(ws, (await openThread(ws)).id));

    const [older, newer] = [a.id, b.id].sort();
    expect(first).toEqual([older, newer]);
    expect(next).toEqual([late.id, older, newer]);
  });

  it('when a person is at capacity, then they are skipped until a thread of theirs closes; a capacity of null never fills', async () => {
    const ws = await createWorkspace(server);
    const small = await person(ws, { name: 'Small', capacity: 1 });
    const unlimited = await person(ws, { name: 'Unlimited', capacity: null });
    const [firstId, secondId] = [small.id, unlimited.id].sort();
    const threads = [];
    for (let i = 0; i < 5; i++) threads.push(await openThread(ws));

    const assigned = [];
    for (const thread of threads.slice(0, 4)) assigned.push(await roundRobin(ws, thread.id));
    const smallThread = threads[assigned.indexOf(small.id)]!;
    await close(ws, smallThread.id);
    const afterClose = await roundRobin(ws, threads[4]!.id);

    // The small one takes one thread, then only the unlimited one has room.
    expect(assigned.filter((id) => id === small.id)).toHaveLength(1);
    expect(assigned.filter((id) => id === unlimited.id)).toHaveLength(3);
    expect(assigned.slice(0, 2)).toEqual([firstId, secondId]);
    // Its thread closed, the small one has room again and its assignment is the oldest.
    expect(afterClose).toBe(small.id);
  });

  it('when the only people are away, offline, inactive or full, and an AI agent exists, then nobody gets the thread: from null to null with no_agent_available', async () => {
    const ws = await createWorkspace(server);
    await ws.api.POST('/agents', { body: buildAgent() });
    await person(ws, { name: 'Away', availability: 'away' });
    await person(ws, { name: 'Offline', availability: 'offline' });
    const inactive = await person(ws, { name: 'Inactive' });
    await ws.api.PATCH('/agents/{id}', { params: { path: { id: inactive.id } }, body: { status: 'inactive' } });
    const full = await person(ws, { name: 'Full', capacity: 1 });
    await openThread(ws, full.id);
    const thread = await openThread(ws);

    const agentId = await roundRobin(ws, thread.id);

    expect(agentId).toBeNull();
    expect(await getThread(ws, thread.id)).toMatchObject({ agentId: null });
    expect((await historyOf(ws, thread.id)).at(-1)).toEqual({
      id: expect.stringMatching(UUID),
      field: 'agentId',
      from: null,
      to: null,
      actor: { type: 'api_key', id: ws.keyId },
      reason: 'no_agent_available',
      createdAt: expect.any(String),
    });
    const { data: agents } = await ws.api.GET('/agents', { params: { query: { type: 'human' } } });
    // Nobody was marked as assigned.
    const rows = await server.db.selectFrom('agents').select('last_assigned_at').where('workspace_id', '=', ws.workspaceId).execute();
    expect(agents!.data).toHaveLength(4);
    expect(rows.every((r) => r.last_assigned_at === null)).toBe(true);
  });

  it('when the thread had an agent and nobody is eligible, then it is unassigned, with the caller’s reason when it gave one', async () => {
    const ws = await createWorkspace(server);
    const { data: ai } = await ws.api.POST('/agents', { body: buildAgent() });
    const thread = await openThread(ws, ai!.id);

    const agentId = await roundRobin(ws, thread.id, 'Cliente pediu um atendente');

    expect(agentId).toBeNull();
    expect((await historyOf(ws, thread.id)).at(-1)).toMatchObject({ field: 'agentId', from: ai!.id, to: null, reason: 'Cliente pediu um atendente' });
  });

  it('when nobody was eligible and someone comes online, then the thread stays unassigned until something assigns it', async () => {
    const ws = await createWorkspace(server);
    const waiting = await openThread(ws);
    expect(await roundRobin(ws, waiting.id)).toBeNull();
    const pedro = await person(ws);

    const next = await openThread(ws);
    expect(await roundRobin(ws, next.id)).toBe(pedro.id);

    expect(await getThread(ws, waiting.id)).toMatchObject({ agentId: null });
    expect(await roundRobin(ws, waiting.id)).toBe(pedro.id);
  });

  it('when the thread belongs to another workspace, then it is not found and nothing changes', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    await person(ws);
    const foreign = await openThread(other);

    const row = await server.db.transaction().execute((trx) => assignRoundRobin(trx, ws.workspaceId, foreign.id, keyActor(ws), null));

    expect(row).toBeUndefined();
    expect(await getThread(other, foreign.id)).toEqual(foreign);
  });
});

describe('what openapi.yaml tells of it', () => {
  it('when a client reads the history operation, then it names the reasons a round robin records and shows a handoff landing on a person', () => {
    const history = spec.paths['/threads/{id}/history'].get;
    const example = history.responses['200'].content['application/json'].example as components['schemas']['ThreadHistoryList'];

    expect(history.description).toContain(NO_AGENT_AVAILABLE);
    for (const actor of spec.components.schemas.HistoryActor.properties.type.enum as string[]) expect(history.description).toContain(`(\`${actor}\``);
    expect(example.data).toContainEqual(
      expect.objectContaining({ field: 'agentId', actor: { type: 'agent', id: expect.any(String) }, to: expect.any(String) }),
    );
  });

  it('when a client reads the Agents tag, then a handoff goes to a person by round robin (the thread no longer just loses its agent)', () => {
    const agents = (spec.tags as { name: string; description: string }[]).find((tag) => tag.name === 'Agents')!.description;

    expect(agents).toContain(AI_UNAVAILABLE);
    expect(agents).not.toMatch(/agentId`\s+becomes null/);
  });
});

describe('a channel whose default agent is a person', () => {
  it('when a thread opens on it, then it is assigned to that person, and inbound messages queue no AI reply', async () => {
    const ws = await createWorkspace(server);
    const pedro = await person(ws);
    const channel = ws.channels.find((c) => c.type === 'whatsapp')!;
    const { response } = await ws.api.PATCH('/channels/{id}', { params: { path: { id: channel.id } }, body: { defaultAgentId: pedro.id } });
    expect(response.status).toBe(200);

    const { data: message, response: sent } = await ws.api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channel.id } },
      body: { from: '+5511912345678', content: 'Oi, preciso de ajuda' },
    });

    expect(sent.status).toBe(201);
    expect(await getThread(ws, message!.threadId)).toMatchObject({ agentId: pedro.id, status: 'open' });
    expect((await historyOf(ws, message!.threadId)).at(-1)).toMatchObject({ field: 'agentId', from: null, to: pedro.id, reason: 'channel_default_agent' });
    const jobs = await server.db.selectFrom('jobs').select('id').where('workspace_id', '=', ws.workspaceId).where('queue', '=', 'ai-reply').execute();
    expect(jobs).toEqual([]);
  });
});

describe.skipIf(!databaseUrl)('concurrent round robins from several instances (needs PostgreSQL: PGlite has one connection)', () => {
  const INSTANCES = 4;
  let instances: Db[] = [];
  beforeAll(async () => {
    // Each its own pool of connections, as separate processes would have.
    instances = await Promise.all(Array.from({ length: INSTANCES }, () => openDatabase()));
  });
  afterAll(async () => {
    await Promise.all(instances.map((db) => db.destroy()));
  });

  /** Runs every assignment at once, spread over the instances, and answers who got each thread. */
  async function assignAllAtOnce(ws: TestWorkspace, threads: Thread[]): Promise<(string | null)[]> {
    return Promise.all(threads.map((thread, i) => roundRobin(ws, thread.id, null, instances[i % INSTANCES])));
  }

  async function openThreads(ws: TestWorkspace, count: number): Promise<Thread[]> {
    return Promise.all(Array.from({ length: count }, () => openThread(ws)));
  }

  async function openLoad(ws: TestWorkspace): Promise<Map<string, number>> {
    const rows = await server.db
      .selectFrom('threads')
      .select(['agent_id', (eb) => eb.fn.countAll<string>().as('n')])
      .where('workspace_id', '=', ws.workspaceId)
      .where('status', '=', 'open')
      .groupBy('agent_id')
      .execute();
    return new Map(rows.map((r) => [r.agent_id ?? 'none', Number(r.n)]));
  }

  it('when 60 threads are assigned at once to 5 people with room for 40, then nobody passes their capacity and the other 20 stay unassigned', async () => {
    const ws = await createWorkspace(server);
    const capacities = [4, 6, 8, 10, 12];
    const people = [];
    for (const capacity of capacities) people.push(await person(ws, { name: `Cap ${capacity}`, capacity }));
    const threads = await openThreads(ws, 60);

    const assigned = await assignAllAtOnce(ws, threads);

    const load = await openLoad(ws);
    for (const [i, p] of people.entries()) expect(load.get(p.id), `${p.name}'s open threads`).toBe(capacities[i]);
    expect(load.get('none')).toBe(20);
    expect(assigned.filter((a) => a === null)).toHaveLength(20);
    const unassigned = threads.filter((_, i) => assigned[i] === null);
    for (const thread of unassigned.slice(0, 5)) {
      expect((await historyOf(ws, thread.id)).at(-1)).toMatchObject({ field: 'agentId', from: null, to: null, reason: 'no_agent_available' });
    }
  });

  it('when 50 threads are assigned at once to 5 people with room to spare, then each gets exactly 10, in turns', async () => {
    const ws = await createWorkspace(server);
    const people = [];
    for (let i = 0; i < 5; i++) people.push(await person(ws, { name: `P${i}`, capacity: 20 }));
    const threads = await openThreads(ws, 50);

    await assignAllAtOnce(ws, threads);

    const load = await openLoad(ws);
    expect(people.map((p) => load.get(p.id))).toEqual([10, 10, 10, 10, 10]);
    expect(load.get('none')).toBeUndefined();
    // In turns: ordered by when they were made, the assignments cycle through the five.
    const history = await server.db
      .selectFrom('thread_history')
      .select('to_id')
      .where('workspace_id', '=', ws.workspaceId)
      .where('field', '=', 'agentId')
      .where('actor_type', '=', 'api_key')
      .orderBy('id')
      .execute();
    const turns = history.map((h) => h.to_id);
    for (let i = 5; i < turns.length; i++) expect(turns[i]).toBe(turns[i - 5]);
  });

  it('when people are made unavailable while threads are being assigned, then nobody is given more than their capacity and nobody inactive or away gets a thread after their change committed', async () => {
    const ws = await createWorkspace(server);
    const stays = await person(ws, { name: 'Stays', capacity: 15 });
    const leaves = await person(ws, { name: 'Leaves', capacity: 15 });
    const threads = await openThreads(ws, 40);

    const [assigned] = await Promise.all([
      assignAllAtOnce(ws, threads),
      ws.api.PATCH('/agents/{id}', { params: { path: { id: leaves.id } }, body: { availability: 'away' } }),
    ]);

    const load = await openLoad(ws);
    expect(load.get(stays.id)).toBe(15);
    expect(load.get(leaves.id) ?? 0).toBeLessThanOrEqual(15);
    expect(assigned.filter((a) => a !== null)).toHaveLength(15 + (load.get(leaves.id) ?? 0));
    const after = await openThread(ws);
    expect(await roundRobin(ws, after.id)).toBeNull();
  });
});
