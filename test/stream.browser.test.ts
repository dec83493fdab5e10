// The README's ten-line page in a real browser (Debian's chromium through playwright-core, as the
// docs test runs it): served from another origin, it opens GET /events/stream with a stream token
// from POST /events/stream-tokens and prints the workspace's events as they commit.
import fs from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildContact, createWorkspace } from './helpers/api.js';
import { hasChromium, launchChromium } from './helpers/browser.js';
import { closeServer, listenOnLoopback } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

const browserPresent = hasChromium('the stream browser test');

/** The HTML block after the README's `<!-- live-events-page -->` marker. */
function readmePage(): string {
  const readme = fs.readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const match = /<!-- live-events-page -->\s*```html\n([\s\S]*?)\n```/.exec(readme);
  if (!match) throw new Error('README.md has no live events page');
  return match[1]!;
}

describe.skipIf(!browserPresent)("the README's live events page in a real browser (needs /usr/bin/chromium)", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Awaited<ReturnType<typeof listenOnLoopback>>;

  beforeAll(async () => {
    server = await startServer();
    const html = readmePage();
    page = await listenOnLoopback(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (page) await closeServer(page.server);
    await server?.close();
  }, 60_000);

  it('when the page opens with a stream token and changes commit, then it prints their events live, and nothing of another workspace', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const { data: token, response } = await ws.api.POST('/events/stream-tokens');
    expect(response.status).toBe(201);
    const tab = await browser.newPage();
    const errors: string[] = [];
    tab.on('pageerror', (error) => errors.push(error.message));
    const streamed = tab.waitForResponse((r) => r.url().includes('/v1/events/stream'), { timeout: 30_000 });
    await tab.goto(`${page.origin}/live.html?api=${encodeURIComponent(server.baseUrl)}&token=${token!.token}`);
    expect((await streamed).status()).toBe(200);

    await other.api.POST('/contacts', { body: buildContact() });
    const { data: contact } = await ws.api.POST('/contacts', { body: buildContact() });
    const { data: thread } = await ws.api.POST('/threads', { body: { contactId: contact!.id, channelId: ws.channels[0]!.id } });
    await expect.poll(() => tab.locator('#log').textContent(), { timeout: 10_000, interval: 100 }).toContain('thread.created');

    const lines = (await tab.locator('#log').textContent())!.trim().split('\n');
    const { data: events } = await ws.api.GET('/events', { params: { query: { limit: 10 } } });
    const [threadEvent, contactEvent] = events!.data;
    expect(lines).toEqual([
      `contact.created ${contactEvent!.id} ${JSON.stringify(contactEvent)}`,
      `thread.created ${threadEvent!.id} ${JSON.stringify(threadEvent)}`,
    ]);
    expect((threadEvent!.data.object as { id: string }).id).toBe(thread!.id);
    expect(errors).toEqual([]);
    await tab.close();
  }, 60_000);
});
