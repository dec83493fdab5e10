// The SSRF guard: which addresses count as public; URLs refused when an endpoint is saved (400
// naming /body/url), including a host name that resolves to 127.0.0.1; and, when an endpoint's name
// resolves to a private address by the time of an attempt, the attempt refused and recorded as a
// failure saying why, nothing sent.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress, resolveTarget } from '../src/outbound/ssrf.js';
import { buildContact, createWorkspace, request } from './helpers/api.js';
import { waitFor } from './helpers/processes.js';
import { WebhookReceiver } from './helpers/receiver.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

describe('public addresses', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '169.254.0.1',
    '100.64.0.1',
    '100.127.255.254',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '192.0.2.1',
    '198.18.0.1',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    '::ffff:127.0.0.1',
    '::ffff:8.8.8.8',
    '64:ff9b::7f00:1',
    '2002:7f00:1::1',
    '2001:db8::1',
    'ff02::1',
    'not-an-address',
    // outside what the address library names: benchmarking, IETF protocol assignments, documentation, outside 2000::/3
    '198.19.255.255',
    '2001:2::1',
    '2001:20::1',
    '3fff::1',
    '100::1',
    '::127.0.0.1',
    '4000::1',
  ])('when the address is %s, then it is not public', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['8.8.8.8', '93.184.216.34', '172.32.0.1', '100.128.0.1', '198.20.0.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888'])(
    'when the address is %s, then it is public',
    (address) => {
      expect(isPublicAddress(address)).toBe(true);
    },
  );

  it('when a host name resolves to loopback, then resolving it for a send is refused naming the address, unless private URLs are allowed', async () => {
    await expect(resolveTarget('https://localhost/hook', false)).rejects.toThrow(/localhost resolves to (127\.0\.0\.1|::1), which is not a public address/);
    await expect(resolveTarget('https://localhost/hook', true)).resolves.toMatchObject({ address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) });
  });
});

let server: TestServer;
let receiver: WebhookReceiver;
let own: OwnDatabase | undefined;
beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, config: { outboundAllowPrivateUrls: false, webhookRetryDelaysMs: [50], jobPollMs: 100 } });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  await own?.drop();
});

describe('when private URLs are not allowed', () => {
  it.each([
    ['http://93.184.216.34/hook', /must start with https:\/\//],
    ['https://localhost/hook', /resolves to (127\.0\.0\.1|::1)/],
    ['https://127.0.0.1/hook', /not a public address/],
    ['https://[::1]/hook', /not a public address/],
    ['https://169.254.169.254/latest/meta-data', /not a public address/],
    ['https://[fd00:ec2::254]/', /not a public address/],
    ['https://[::ffff:127.0.0.1]/hook', /not a public address/],
    ['https://10.0.0.8/hook', /not a public address/],
    ['https://100.64.0.1/hook', /not a public address/],
    ['https://user:pass@93.184.216.34/hook', /user name or password/],
  ])('when an endpoint is created with %s, then it is a 400 naming /body/url and nothing is stored', async (url, message) => {
    const ws = await createWorkspace(server);
    const res = await request(server, 'POST', '/v1/webhook-endpoints', { apiKey: ws.apiKey, body: { url, events: ['*'] } });

    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details).toEqual([{ path: '/body/url', message: expect.stringMatching(message) }]);
    expect((await ws.api.GET('/webhook-endpoints')).data!.data).toEqual([]);
  });

  it('when an endpoint is created with https to a public address, then it is accepted; changing it to a private one is a 400', async () => {
    const ws = await createWorkspace(server);
    const { data, response } = await ws.api.POST('/webhook-endpoints', { body: { url: 'https://93.184.216.34/hook', events: ['thread.updated'] } });
    expect(response.status).toBe(201);
    await ws.api.PATCH('/webhook-endpoints/{id}', { params: { path: { id: data!.id } }, body: { enabled: false } });

    const res = await request(server, 'PATCH', `/v1/webhook-endpoints/${data!.id}`, { apiKey: ws.apiKey, body: { url: 'https://localhost/hook' } });
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].path).toBe('/body/url');
  });

  it('when an endpoint’s host name resolves to 127.0.0.1 at send time, then the attempt is refused, recorded as failed with the reason, and nothing is sent', async () => {
    const ws = await createWorkspace(server);
    const port = new URL(receiver.url).port;
    // Saved when its name still resolved to a public address (DNS rebinding): written as the API would have.
    const id = uuidv7();
    await sql`
      insert into webhook_endpoints (workspace_id, id, url, events, secret, created_at, updated_at)
      values (${ws.workspaceId}, ${id}, ${`https://localhost:${port}/rebound`}, ${['*']}, ${server.secrets!.seal('whsec_' + Buffer.alloc(32, 7).toString('base64'))}, now(), now())`.execute(
      server.db,
    );
    await ws.api.POST('/contacts', { body: buildContact() });

    let delivery: any;
    await waitFor('delivery failed', async () => {
      delivery = (await ws.api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id } } })).data!.data[0];
      return delivery?.status === 'failed';
    });
    expect(delivery).toMatchObject({ status: 'failed', attempts: 2, lastResponseStatus: null });
    expect(delivery.lastError).toMatch(/^refused to send: the URL host localhost resolves to (127\.0\.0\.1|::1), which is not a public address$/);
    expect(receiver.requests).toHaveLength(0);
  });
});
