// GET /docs in a real browser (Debian's chromium through playwright-core): Swagger UI renders every
// operation of the contract with Authorize and the operations on the first screen and the guide
// below them, shows the host serving the page as its server, asks nothing of any host but this one,
// logs no error, its "Try it out" contact does not clash with the README's, and "Try it out" of
// POST /media uploads a file chosen in the page (the binary body as a file picker) that
// GET /media/{id} then serves byte for byte.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import zlib from 'node:zlib';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spec } from '../src/contract.js';
import { createWorkspace, UUID } from './helpers/api.js';
import { hasChromium, launchChromium } from './helpers/browser.js';
import { startServer, type TestServer } from './helpers/server.js';

const SCREENSHOT = '/tmp/docs.png';
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** A real PNG (signature, IHDR, IDAT, IEND with their CRCs) of `size` x `size` random RGB pixels. */
function png(size: number): Buffer {
  const chunk = (type: string, data: Buffer): Buffer => {
    const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(typed));
    return Buffer.concat([length, typed, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits per sample, RGB, deflate, no filter method, no interlace
  const rows = Array.from({ length: size }, () => Buffer.concat([Buffer.from([0]), randomBytes(size * 3)]));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

const browserPresent = hasChromium('the /docs browser test');

describe.skipIf(!browserPresent)('GET /docs in a real browser (needs /usr/bin/chromium)', () => {
  let server: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    server = await startServer();
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  }, 60_000);

  // Every operation of the contract: the /v1 ones and Meta's webhooks (served outside /v1); then the
  // events this service sends to integrators (OpenAPI 3.1's top-level `webhooks`), shown as well.
  const documented = Object.entries<Record<string, { operationId: string }>>(spec.paths).flatMap(([path, item]) =>
    (['get', 'post', 'patch', 'put', 'delete'] as const)
      .filter((method) => item[method])
      .map((method) => ({ path, method, operationId: item[method]!.operationId })),
  );
  const sentWebhooks = Object.entries<Record<string, { operationId: string }>>(spec.webhooks).map(([name, item]) => ({
    name,
    operationId: item.post!.operationId,
  }));

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
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 60_000, interval: 250 }).toBe(documented.length + sentWebhooks.length);
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
    const expected = [
      ...documented.map((op) => ({
        id: `operations-${spec.paths[op.path][op.method].tags[0].replaceAll(' ', '_')}-${op.operationId}`, // Swagger UI writes a tag's spaces as _ in its ids
        method: op.method.toUpperCase(),
        path: op.path,
        summary: spec.paths[op.path][op.method].summary as string,
      })),
      ...sentWebhooks.map((hook) => ({
        // Swagger UI files them under its own "webhooks" section, whatever their tags.
        id: `operations-webhooks-${hook.operationId}`,
        method: 'POST',
        path: hook.name,
        summary: spec.webhooks[hook.name].post.summary as string,
      })),
    ];
    const byKey = (a: { method: string; path: string }, b: { method: string; path: string }) => `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`);
    expect(rendered.sort(byKey)).toEqual(expected.sort(byKey));
    await expect(page.title()).resolves.toBe('Support Funnel API v1 reference');
    await expect(page.locator('.info .title').innerText()).resolves.toContain('Support Funnel API');

    const offMachine = requests.filter((url) => {
      const { protocol, hostname } = new URL(url);
      return protocol !== 'data:' && !LOCAL_HOSTS.has(hostname);
    });
    expect(offMachine).toEqual([]);
    expect(requests).toContain(`${server.baseUrl}/docs/openapi.json`);
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);

  it('when the page loads, then Authorize and the first operations are on the first screen, and the guide comes after the last operation and webhook', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${server.baseUrl}/docs`, { waitUntil: 'load', timeout: 60_000 });
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 60_000, interval: 250 }).toBe(documented.length + sentWebhooks.length);

    const authorize = await page.locator('.btn.authorize').boundingBox();
    const operations = page.locator('.opblock');
    const first = await operations.first().boundingBox();
    const last = await operations.last().boundingBox();
    const guide = await page.locator('#guide').boundingBox();
    const guideText = await page.locator('#guide').innerText();

    expect(authorize!.y + authorize!.height).toBeLessThanOrEqual(900);
    expect(first!.y + first!.height).toBeLessThanOrEqual(900);
    expect(guide!.y).toBeGreaterThan(last!.y + last!.height);
    for (const heading of ['Authentication and scopes', 'Order of checks', 'Errors', 'Rate limits', 'Lists']) expect(guideText).toContain(heading);
    await expect(page.locator('.info .description').innerText()).resolves.not.toContain('Order of checks');
    await page.close();
  }, 180_000);

  it('when the servers are shown, then the one selected is the host serving the page', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${server.baseUrl}/docs`, { waitUntil: 'load', timeout: 60_000 });
    await expect.poll(() => page.locator('.servers select').count(), { timeout: 60_000, interval: 250 }).toBe(1);

    await expect(page.locator('.servers select').inputValue()).resolves.toBe(`${server.baseUrl}/v1`);
    await page.close();
  }, 180_000);

  it("when POST /contacts is tried out, then its example contact's phone is not the README's", async () => {
    const readme = fs.readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const readmePhones = [...readme.matchAll(/"phone":"(\+\d+)"/g)].map((m) => m[1]!);
    expect(readmePhones.length).toBeGreaterThan(0);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${server.baseUrl}/docs#/Contacts/createContact`, { waitUntil: 'load', timeout: 60_000 });
    const operation = page.locator('#operations-Contacts-createContact');
    await expect.poll(() => operation.locator('.try-out__btn').count(), { timeout: 60_000, interval: 250 }).toBe(1);

    await operation.locator('.try-out__btn').click();
    const body = JSON.parse(await operation.locator('textarea.body-param__text').inputValue()) as { phone?: string };

    expect(body.phone).toMatch(/^\+[1-9]\d{7,14}$/);
    expect(readmePhones).not.toContain(body.phone);
    await page.close();
  }, 180_000);

  it('when a PNG is chosen in "Try it out" of POST /media after Authorize, then the page shows the 201 attachment and GET /media/{id} serves the same bytes', async () => {
    const ws = await createWorkspace(server);
    const image = png(48);
    const file = { name: 'recibo.png', mimeType: 'image/png', buffer: image };
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(`page: ${error.message}`));
    // The body the page sends is a Blob, which the browser does not hand to playwright: the size and
    // SHA-256 the server answers, and the bytes it serves back, tell it was the file.
    const uploads: { method: string; url: string; contentType: string | undefined; idem: string | undefined }[] = [];
    page.on('request', (request) => {
      if (new URL(request.url()).pathname === '/v1/media')
        uploads.push({
          method: request.method(),
          url: request.url(),
          contentType: request.headers()['content-type'],
          idem: request.headers()['idempotency-key'],
        });
    });
    await page.goto(`${server.baseUrl}/docs#/Messages/uploadMedia`, { waitUntil: 'load', timeout: 60_000 });
    const operation = page.locator('#operations-Messages-uploadMedia');
    await expect.poll(() => operation.locator('.try-out__btn').count(), { timeout: 60_000, interval: 250 }).toBe(1);

    // Authorize: the API key in bearerAuth's field, applied, the dialog closed.
    await page.locator('.btn.authorize').first().click();
    const bearer = page.locator('.auth-container').filter({ has: page.locator('h4 code', { hasText: /^bearerAuth$/ }) });
    await bearer.locator('#auth-bearer-value').fill(ws.apiKey);
    await bearer.locator('button.modal-btn.authorize').click();
    await bearer.locator('button.btn-done').click();
    await expect.poll(() => operation.locator('.authorization__btn').getAttribute('aria-label')).toBe('authorization button locked');

    await operation.locator('.try-out__btn').click();
    await operation.locator('select#post_media_requests_select').selectOption('image/png');
    await operation.locator('.opblock-section-request-body input[type=file]').setInputFiles(file);
    await operation.locator('tr[data-param-name="filename"] input').fill('recibo.png');
    await operation.locator('button.execute').click();

    const live = operation.locator('.live-responses-table tbody .response');
    await expect.poll(() => live.locator('.response-col_status').first().innerText(), { timeout: 30_000, interval: 250 }).toBe('201');
    const shown = JSON.parse(await live.locator('.response-col_description pre.microlight').first().innerText()) as Record<string, unknown>;
    expect(shown).toEqual({
      id: expect.stringMatching(UUID),
      type: 'image',
      mimeType: 'image/png',
      size: image.length,
      sha256: sha256(image),
      filename: 'recibo.png',
      caption: null,
      status: 'stored',
    });
    // What the page sent: one request, with the type chosen and the file's name.
    expect(uploads).toHaveLength(1);
    expect(uploads[0]!.method).toBe('POST');
    expect(new URL(uploads[0]!.url).searchParams.get('filename')).toBe('recibo.png');
    expect(uploads[0]!.contentType).toBe('image/png');
    // The Idempotency-Key field starts empty (its example left out of the page's copy): none is sent.
    expect(uploads[0]!.idem).toBeUndefined();

    const download = await fetch(`${server.baseUrl}/v1/media/${shown.id as string}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    expect(download.headers.get('etag')).toBe(`"${sha256(image)}"`);
    expect(Buffer.from(await download.arrayBuffer()).equals(image)).toBe(true);

    // Another file from the same page is another upload (no key shared with the first: no 422).
    const second = png(16);
    await operation.locator('.opblock-section-request-body input[type=file]').setInputFiles({ ...file, buffer: second });
    await operation.locator('button.execute').click();
    await expect.poll(() => uploads.length, { timeout: 30_000, interval: 250 }).toBe(2);
    await expect
      .poll(
        async () =>
          JSON.parse(
            (await live
              .locator('.response-col_description pre.microlight')
              .first()
              .innerText()
              .catch(() => '')) || '{}',
          ).sha256,
        {
          timeout: 30_000,
          interval: 250,
        },
      )
      .toBe(sha256(second));
    await expect(live.locator('.response-col_status').first().innerText()).resolves.toBe('201');
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);
});
