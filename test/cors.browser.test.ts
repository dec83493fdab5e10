// Cross-origin calls in a real browser (Debian's chromium through playwright-core): a page served from
// another origin calls /v1 with its key as a front end built against the mock would, preflights
// included, and reads the answers' documented headers; an error and a refused stream token are read
// as answers, not as network errors.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, UUID } from './helpers/api.js';
import { hasChromium, launchChromium } from './helpers/browser.js';
import { closeServer, listenOnLoopback } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

const browserPresent = hasChromium('the cross-origin browser test');

interface Answer {
  status: number;
  body: unknown;
  headers: Record<string, string | null>;
}

describe.skipIf(!browserPresent)('a page on another origin calling the API (needs /usr/bin/chromium)', () => {
  let server: TestServer;
  let browser: Browser;
  let site: Awaited<ReturnType<typeof listenOnLoopback>>;
  let tab: Page;

  beforeAll(async () => {
    server = await startServer();
    site = await listenOnLoopback(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>front end</title>');
    });
    browser = await launchChromium();
    tab = await browser.newPage();
    await tab.goto(`${site.origin}/`);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (site) await closeServer(site.server);
    await server?.close();
  }, 60_000);

  /** fetch() in the page; the headers asked for as the page can read them (null: hidden from it). */
  function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: string }, read: string[]): Promise<Answer> {
    return tab.evaluate(
      async ({ url, init, read }) => {
        const res = await fetch(url, init);
        const text = await res.text();
        return {
          status: res.status,
          body: text ? JSON.parse(text) : null,
          headers: Object.fromEntries(read.map((name) => [name, res.headers.get(name)])),
        };
      },
      { url, init, read },
    );
  }

  it('when a page creates, reads, changes and deletes a contact with its key, then each call (preflighted) answers it with its headers readable', async () => {
    const ws = await createWorkspace(server, { plan: 'pro' });
    const auth = { authorization: `Bearer ${ws.apiKey}` };
    const created = await call(
      `${server.baseUrl}/v1/contacts`,
      {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'front-end-1', 'x-request-id': 'page-req-1' },
        body: JSON.stringify({ name: 'Maria da Página' }),
      },
      ['x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'idempotent-replayed'],
    );
    expect(created).toMatchObject({
      status: 201,
      body: { id: expect.stringMatching(UUID), name: 'Maria da Página' },
      headers: { 'x-request-id': 'page-req-1', 'ratelimit-limit': '300', 'idempotent-replayed': null },
    });
    const id = (created.body as { id: string }).id;
    const replayed = await call(
      `${server.baseUrl}/v1/contacts`,
      {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'front-end-1' },
        body: JSON.stringify({ name: 'Maria da Página' }),
      },
      ['idempotent-replayed'],
    );
    expect(replayed).toMatchObject({ status: 201, body: { id }, headers: { 'idempotent-replayed': 'true' } });

    const read = await call(`${server.baseUrl}/v1/contacts/${id}`, { headers: auth }, []);
    expect(read).toMatchObject({ status: 200, body: { id } });
    const changed = await call(
      `${server.baseUrl}/v1/contacts/${id}`,
      { method: 'PATCH', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ labels: ['vip'] }) },
      [],
    );
    expect(changed).toMatchObject({ status: 200, body: { id, labels: ['vip'] } });
    expect(await call(`${server.baseUrl}/v1/contacts/${id}`, { method: 'DELETE', headers: auth }, [])).toMatchObject({ status: 204 });
  }, 60_000);

  it('when a call is refused (no key, a wrong method, an unknown stream token), then the page reads the error as the API wrote it', async () => {
    const noKey = await call(`${server.baseUrl}/v1/contacts`, {}, ['x-request-id']);
    expect(noKey).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } }, headers: { 'x-request-id': expect.any(String) } });
    const ws = await createWorkspace(server);
    const wrongMethod = await call(`${server.baseUrl}/v1/me`, { method: 'DELETE', headers: { authorization: `Bearer ${ws.apiKey}` } }, ['allow']);
    expect(wrongMethod).toMatchObject({ status: 405, body: { error: { code: 'method_not_allowed' } }, headers: { allow: 'GET' } });
    const badToken = await call(`${server.baseUrl}/v1/events/stream?token=sst_${'x'.repeat(43)}`, {}, []);
    expect(badToken).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
  }, 60_000);
});
