// GET /docs in a real browser (Debian's chromium through playwright-core): Swagger UI renders every
// operation of the contract, asks nothing of any host but this one, and logs no error.
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractOperations, spec } from '../src/contract.js';
import { startServer, type TestServer } from './helpers/server.js';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = '/tmp/docs.png';
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

const hasChromium = fs.existsSync(CHROMIUM);
if (!hasChromium) console.warn(`${CHROMIUM} is missing: the /docs browser test is SKIPPED (apt-get install chromium; CI installs it)`);

describe.skipIf(!hasChromium)('GET /docs in a real browser (needs /usr/bin/chromium)', () => {
  let server: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    server = await startServer();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-quic',
        '--no-first-run',
        '--disable-sync',
      ],
      timeout: 90_000,
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  }, 60_000);

  it('when the page loads, then it renders every operation, requests only this host and logs no error', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const requests: string[] = [];
    const errors: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => errors.push(`page: ${error.message}`));

    const response = await page.goto(`${server.baseUrl}/docs`, { waitUntil: 'load', timeout: 60_000 });
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 60_000, interval: 250 }).toBe(contractOperations.length);
    // Let late requests start; every request the page starts is recorded and checked below, so a
    // machine too busy to reach "network idle" soon only shortens the wait, never the check.
    await page.waitForLoadState('networkidle', { timeout: 15_000 }).catch(() => undefined);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    expect(response?.status()).toBe(200);
    const rendered = await page.$$eval('.opblock', (blocks) =>
      blocks.map((block) => ({
        id: block.id,
        method: block.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '',
        path: block.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? '',
        summary: block.querySelector('.opblock-summary-description')?.textContent?.trim() ?? '',
      })),
    );
    const expected = contractOperations.map((op) => ({
      id: `operations-${spec.paths[op.path][op.method].tags[0]}-${op.operationId}`,
      method: op.method.toUpperCase(),
      path: op.path,
      summary: spec.paths[op.path][op.method].summary as string,
    }));
    const byKey = (a: { method: string; path: string }, b: { method: string; path: string }) =>
      `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`);
    expect(rendered.sort(byKey)).toEqual(expected.sort(byKey));
    await expect(page.title()).resolves.toBe('Support Funnel API v1 reference');
    await expect(page.locator('.info .title').innerText()).resolves.toContain('Support Funnel API');

    const offMachine = requests.filter((url) => {
      const { protocol, hostname } = new URL(url);
      return protocol !== 'data:' && !LOCAL_HOSTS.has(hostname);
    });
    expect(offMachine).toEqual([]);
    expect(requests).toContain(`${server.baseUrl}/openapi.json`);
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);
});
