// Webhook endpoints and their deliveries, against a local receiver (the network edge): the secret
// shown once; each attempt signed as Standard Webhooks says (checked with the `standardwebhooks`
// package, the specification's own verifier); retries that keep the event id; the delivery log;
// manual retry; disabled endpoints; the type filter; workspace isolation; a slow endpoint that does
// not delay a fast one; and an endpoint disabled after 5 days of failures.
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { WEBHOOK_QUEUE } from '../src/events/record.js';
import { buildContact, createWorkspace, ISO_MS, request, UUID, type TestWorkspace } from './helpers/api.js';
import { waitFor } from './helpers/processes.js';
import { waitForNoJobs } from './helpers/queue.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

type Endpoint = components['schemas']['WebhookEndpoint'];
type Delivery = components['schemas']['WebhookDelivery'];
type EventType = components['schemas']['WebhookEventTypes'][number];

let server: TestServer;
let receiver: WebhookReceiver;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  // Its workers take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({
    databaseUrl: own?.url,
    jobs: true,
    config: {
      webhookRetryDelaysMs: [50, 50],
      outboundAllowPrivateUrls: true,
      webhookConcurrency: 8,
      webhookEndpointConcurrency: 2,
      jobPollMs: 100,
    },
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  await own?.drop();
});
beforeEach(() => receiver.answer(undefined));

let paths = 0;
async function endpoint(ws: TestWorkspace, events: EventType[] = ['*']): Promise<{ endpoint: Endpoint; secret: string; path: string }> {
  const path = `/hooks/${++paths}`;
  const { data, response } = await ws.api.POST('/webhook-endpoints', { body: { url: `${receiver.url}${path}`, events, description: 'test' } });
  expect(response.status).toBe(201);
  const { secret, ...rest } = data!;
  return { endpoint: rest, secret, path };
}

async function deliveries(ws: TestWorkspace, endpointId: string): Promise<Delivery[]> {
  const { data } = await ws.api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id: endpointId }, query: { limit: 100 } } });
  return data!.data;
}

async function waitForDelivery(ws: TestWorkspace, endpointId: string, check: (d: Delivery[]) => boolean, what: string): Promise<Delivery[]> {
  let list: Delivery[] = [];
  await waitFor(what, async () => check((list = await deliveries(ws, endpointId))));
  return list;
}

const createContact = async (ws: TestWorkspace) => (await ws.api.POST('/contacts', { body: buildContact() })).data!;

describe('endpoints', () => {
  it('when an endpoint is created, then its secret is whsec_ + 32 random bytes, shown only in the 201', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, secret } = await endpoint(ws, ['message.created', 'thread.updated']);

    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(created).toMatchObject({ events: ['message.created', 'thread.updated'], description: 'test', enabled: true, disabledReason: null });
    expect(created.id).toMatch(UUID);
    expect(created.createdAt).toMatch(ISO_MS);
    const { data: read } = await ws.api.GET('/webhook-endpoints/{id}', { params: { path: { id: created.id } } });
    const { data: list } = await ws.api.GET('/webhook-endpoints');
    expect(read).toEqual(created);
    expect(list!.data).toEqual([created]);
    expect(JSON.stringify([read, list])).not.toContain(secret.slice(6));
  });

  it('when an endpoint is changed and deleted, then reads follow, and it is 404 after', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created } = await endpoint(ws);
    const { data: changed } = await ws.api.PATCH('/webhook-endpoints/{id}', {
      params: { path: { id: created.id } },
      body: { events: ['thread.created'], description: null, enabled: false, url: `${receiver.url}/moved` },
    });
    expect(changed).toMatchObject({ events: ['thread.created'], description: null, enabled: false, url: `${receiver.url}/moved` });

    const deleted = await ws.api.DELETE('/webhook-endpoints/{id}', { params: { path: { id: created.id } } });
    const after = await ws.api.GET('/webhook-endpoints/{id}', { params: { path: { id: created.id } } });
    expect(deleted.response.status).toBe(204);
    expect(after.response.status).toBe(404);
  });

  it('when a key of another workspace asks for an endpoint, its deliveries or a retry, then it is 404', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const { endpoint: created } = await endpoint(ws);
    const id = created.id;

    expect((await other.api.GET('/webhook-endpoints/{id}', { params: { path: { id } } })).response.status).toBe(404);
    expect((await other.api.PATCH('/webhook-endpoints/{id}', { params: { path: { id } }, body: { enabled: false } })).response.status).toBe(404);
    expect((await other.api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id } } })).response.status).toBe(404);
    expect((await other.api.DELETE('/webhook-endpoints/{id}', { params: { path: { id } } })).response.status).toBe(404);
    expect((await other.api.GET('/webhook-endpoints')).data!.data).toEqual([]);
  });

  it('when a key has only webhooks:read, then creating an endpoint is 403', async () => {
    const ws = await createWorkspace(server, { scopes: ['webhooks:read'] });
    const res = await request(server, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: { url: `${receiver.url}/x`, events: ['*'] } });
    expect(res.status).toBe(403);
  });
});

describe('delivery', () => {
  it('when an event is recorded, then the endpoint gets it signed as Standard Webhooks says, the body being the event as GET /events/{id} answers', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, secret, path } = await endpoint(ws);
    const contact = await createContact(ws);

    const [received] = await receiver.waitFor(1, path);
    const payload = new Webhook(secret).verify(received!.body, received!.headers) as components['schemas']['Event'];
    const { data: event } = await ws.api.GET('/events/{id}', { params: { path: { id: payload.id } } });

    expect(received!.method).toBe('POST');
    expect(received!.headers['content-type']).toBe('application/json');
    expect(received!.headers['webhook-id']).toBe(payload.id);
    expect(payload).toEqual(event);
    expect(payload).toMatchObject({ type: 'contact.created', data: { object: contact } });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(received!.body, received!.headers)).toThrow();
    const [delivery] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'succeeded', 'delivery succeeded');
    expect(delivery).toMatchObject({
      eventId: payload.id,
      eventType: 'contact.created',
      status: 'succeeded',
      attempts: 1,
      lastResponseStatus: 204,
      lastError: null,
      nextAttemptAt: null,
    });
    expect(delivery!.lastAttemptAt).toMatch(ISO_MS);
  });

  it('when the endpoint fails twice, then the retries carry the same webhook-id, each freshly signed, and the third succeeds', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, secret, path } = await endpoint(ws);
    receiver.answer((r, i) => (r.path === path && receiver.to(path).indexOf(r) < 2 ? { status: i % 2 ? 500 : 503 } : undefined));
    await createContact(ws);

    const attempts = await receiver.waitFor(3, path);
    const [delivery] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'succeeded', 'delivery succeeded');

    expect(new Set(attempts.map((a) => a.headers['webhook-id'])).size).toBe(1);
    for (const attempt of attempts) expect(() => new Webhook(secret).verify(attempt.body, attempt.headers)).not.toThrow();
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 3, lastResponseStatus: 204 });
  });

  it('when every attempt fails (a redirect included), then after the last retry the delivery is failed with the last status; a manual retry sends it again now', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, path } = await endpoint(ws);
    receiver.answer((r) => (r.path === path ? { status: 302, headers: { location: `${receiver.url}/elsewhere` } } : undefined));
    await createContact(ws);

    const [failed] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'failed', 'delivery failed');
    expect(failed).toMatchObject({ status: 'failed', attempts: 3, lastResponseStatus: 302, nextAttemptAt: null });
    expect(failed!.lastError).toMatch(/redirect/);
    expect(receiver.to('/elsewhere')).toHaveLength(0);
    expect(receiver.to(path)).toHaveLength(3);

    receiver.answer(undefined);
    const { data: retried, response } = await ws.api.POST('/webhook-endpoints/{id}/deliveries/{deliveryId}/retry', {
      params: { path: { id: created.id, deliveryId: failed!.id } },
    });
    expect(response.status).toBe(202);
    expect(retried).toMatchObject({ id: failed!.id, status: 'pending' });
    const [succeeded] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'succeeded', 'delivery succeeded');
    expect(succeeded).toMatchObject({ status: 'succeeded', attempts: 4, lastResponseStatus: 204 });
    expect(receiver.to(path)).toHaveLength(4);
  });

  it('when a delivery is retried by hand while its attempt is still running, then the retry waits for it (two attempts never overlap) and one more attempt follows it', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, path } = await endpoint(ws);
    let sent = 0;
    receiver.answer((r) => (r.path === path && sent++ === 0 ? { status: 503, delayMs: 800 } : undefined));
    await createContact(ws);
    await receiver.waitFor(1, path);
    const [running] = await deliveries(ws, created.id);

    const { response } = await ws.api.POST('/webhook-endpoints/{id}/deliveries/{deliveryId}/retry', {
      params: { path: { id: created.id, deliveryId: running!.id } },
    });
    const [succeeded] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'succeeded', 'delivery succeeded');
    await waitForNoJobs(server.db, ws.workspaceId, WEBHOOK_QUEUE);
    const [first, second, ...more] = receiver.to(path);

    expect(response.status).toBe(202);
    expect(more).toEqual([]);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(800);
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(succeeded).toMatchObject({ status: 'succeeded', attempts: 2, lastResponseStatus: 204 });
  });

  it('when a failed delivery is retried by hand and fails again, then it is failed again with one more attempt and no new schedule', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, path } = await endpoint(ws);
    receiver.answer((r) => (r.path === path ? { status: 503 } : undefined));
    await createContact(ws);
    const [failed] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'failed', 'delivery failed');

    await ws.api.POST('/webhook-endpoints/{id}/deliveries/{deliveryId}/retry', { params: { path: { id: created.id, deliveryId: failed!.id } } });
    const [again] = await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'failed' && d[0].attempts === 4, 'failed again');

    expect(again).toMatchObject({ status: 'failed', attempts: 4, lastResponseStatus: 503, nextAttemptAt: null });
    await waitForNoJobs(server.db, ws.workspaceId, WEBHOOK_QUEUE);
    expect(receiver.to(path)).toHaveLength(4);
  });

  it('when an endpoint is disabled, then it receives nothing and no delivery is made for it', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: off, path: offPath } = await endpoint(ws);
    const { path: onPath } = await endpoint(ws);
    await ws.api.PATCH('/webhook-endpoints/{id}', { params: { path: { id: off.id } }, body: { enabled: false } });
    await createContact(ws);

    await receiver.waitFor(1, onPath);
    expect(receiver.to(offPath)).toHaveLength(0);
    expect(await deliveries(ws, off.id)).toEqual([]);
  });

  it('when an endpoint subscribes to some types, then it gets only those', async () => {
    const ws = await createWorkspace(server);
    const { path } = await endpoint(ws, ['thread.created']);
    const { path: all } = await endpoint(ws, ['*']);
    const contact = await createContact(ws);
    await ws.api.POST('/messages', { body: { contactId: contact.id, channelId: ws.channels[0]!.id, content: 'Olá' } });

    await receiver.waitFor(5, all); // contact, thread, message created; sent, delivered
    const got = receiver.to(path).map((r) => JSON.parse(r.body).type);
    expect(got).toEqual(['thread.created']);
  });

  it('when two workspaces have endpoints, then each gets only its own workspace’s events', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const mine = await endpoint(ws);
    const theirs = await endpoint(other);
    const contact = await createContact(ws);
    const otherContact = await createContact(other);

    const [received] = await receiver.waitFor(1, mine.path);
    const [otherReceived] = await receiver.waitFor(1, theirs.path);
    expect(JSON.parse(received!.body).data.object.id).toBe(contact.id);
    expect(JSON.parse(otherReceived!.body).data.object.id).toBe(otherContact.id);
    expect(receiver.to(mine.path)).toHaveLength(1);
  });

  it('when one endpoint hangs for 5 s on every request, then another endpoint still gets all its deliveries at once', async () => {
    const ws = await createWorkspace(server);
    const slow = await endpoint(ws);
    const fast = await endpoint(ws);
    receiver.answer((r) => (r.path === slow.path ? { status: 204, delayMs: 5_000 } : undefined));
    const started = Date.now();
    // 8 worker slots, 2 per endpoint: without the cap the slow endpoint's 12 would take all 8.
    for (let i = 0; i < 12; i++) await createContact(ws);

    const fastGot = await receiver.waitFor(12, fast.path, 4_500);
    const slowFirstDone = Math.min(...receiver.to(slow.path).map((r) => r.at)) + 5_000;
    expect(Math.max(...fastGot.map((r) => r.at))).toBeLessThan(slowFirstDone);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(receiver.to(slow.path).length).toBeLessThanOrEqual(2);
  }, 40_000);

  it('when every attempt to an endpoint has failed for 5 days, then the next failure disables it, saying why, and it gets nothing more', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created, path } = await endpoint(ws);
    receiver.answer((r) => (r.path === path ? { status: 500 } : undefined));
    await createContact(ws);
    await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'failed', 'delivery failed');
    const { data: stillOn } = await ws.api.GET('/webhook-endpoints/{id}', { params: { path: { id: created.id } } });
    expect(stillOn!.enabled).toBe(true);
    // The failing streak began 5 days and a minute ago.
    await sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where workspace_id = ${ws.workspaceId} and id = ${created.id}`.execute(
      server.db,
    );

    await createContact(ws);
    await waitFor('endpoint disabled', async () => !(await ws.api.GET('/webhook-endpoints/{id}', { params: { path: { id: created.id } } })).data!.enabled);
    const { data: disabled } = await ws.api.GET('/webhook-endpoints/{id}', { params: { path: { id: created.id } } });
    expect(disabled!.disabledReason).toMatch(/failed \(5 days\).*HTTP 500/);
    const before = receiver.to(path).length;
    await createContact(ws);
    // Deliveries and their jobs are made in the event's transaction: once none is left, nothing more is sent.
    await waitForNoJobs(server.db, ws.workspaceId, WEBHOOK_QUEUE);
    expect(receiver.to(path)).toHaveLength(before);
    expect(await deliveries(ws, created.id)).toHaveLength(2);

    const { data: enabled } = await ws.api.PATCH('/webhook-endpoints/{id}', { params: { path: { id: created.id } }, body: { enabled: true } });
    expect(enabled).toMatchObject({ enabled: true, disabledReason: null });
  });

  it('when an attempt succeeds, then the failing streak ends and the endpoint stays enabled', async () => {
    const ws = await createWorkspace(server);
    const { endpoint: created } = await endpoint(ws);
    await sql`update webhook_endpoints set failing_since = now() - interval '6 days' where workspace_id = ${ws.workspaceId} and id = ${created.id}`.execute(
      server.db,
    );
    await createContact(ws);
    await waitForDelivery(ws, created.id, (d) => d[0]?.status === 'succeeded', 'delivery succeeded');

    const row = await server.db.selectFrom('webhook_endpoints').select(['failing_since', 'enabled']).where('id', '=', created.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ failing_since: null, enabled: true });
  });
});
