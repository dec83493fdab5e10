// POST /media and GET /media/{id} on the file store (a temp directory): uploads stream to disk with
// their SHA-256 and are served back with ETag, If-None-Match and Range; wrong types, files over the
// limit (declared or chunked) and uploads cut short store nothing.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request, UUID } from './helpers/api.js';
import { fileStore } from '../src/media/file-store.js';
import type { MediaStore } from '../src/media/store.js';
import { fetchFromAnotherProcess, LogCapture } from './helpers/processes.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let dir: string;
const logs = new LogCapture();

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sf-media-'));
  server = await startServer({ config: { mediaStore: { kind: 'file', dir } }, logs: logs.destination });
});
afterAll(async () => {
  await server.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

async function upload(apiKey: string, bytes: Buffer, type: string, query = '', headers: Record<string, string> = {}) {
  return request(server, 'POST', `/v1/media${query}`, { apiKey, headers: { 'content-type': type, ...headers }, rawBody: bytes });
}

async function filesUnder(root: string): Promise<string[]> {
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

async function mediaRows(workspaceId: string): Promise<number> {
  const rows = await server.db.selectFrom('media').select('id').where('workspace_id', '=', workspaceId).execute();
  return rows.length;
}

/** Sends a request by hand (a body the fetch API cannot send: a false Content-Length, chunks, a cut). */
function rawRequest(
  apiKey: string,
  headers: Record<string, string>,
  write: (req: http.ClientRequest) => void,
): Promise<{ status: number; body: string } | { error: string }> {
  const url = new URL(`${server.baseUrl}/v1/media`);
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', (err) => resolve({ error: err.message }));
    write(req);
  });
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('POST /media', () => {
  it.each([
    ['a slash and a backslash', 'notas/2026\\marco.pdf', 'notas_2026_marco.pdf'],
    ['a line break and a bidirectional override', 'fatura\n\u202Efdp.exe', 'faturafdp.exe'],
    ['only control characters', '\u0001\u0002', null],
  ])('when the file name holds %s, then it is cleaned as a received name is, not refused', async (_case, sent, kept) => {
    const ws = await createWorkspace(server);
    const res = await request(server, 'POST', `/v1/media?filename=${encodeURIComponent(sent)}`, {
      apiKey: ws.apiKey,
      rawBody: Buffer.from('%PDF-1.4 nota'),
      headers: { 'content-type': 'application/pdf' },
    });

    expect(res.status).toBe(201);
    expect((res.body as { filename: string | null }).filename).toBe(kept);
  });

  it('when a JPEG is uploaded with the typed client, then it answers the stored attachment and GET /media/{id} serves the same bytes', async () => {
    const ws = await createWorkspace(server);
    const bytes = randomBytes(200_000);

    const { data, response } = await ws.api.POST('/media', {
      params: { query: { filename: 'comprovante.jpg' } },
      body: bytes as unknown as string,
      bodySerializer: (body: unknown) => body as Buffer,
      headers: { 'content-type': 'image/jpeg' },
    });

    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(UUID),
      type: 'image',
      mimeType: 'image/jpeg',
      size: 200_000,
      sha256: sha256(bytes),
      filename: 'comprovante.jpg',
      caption: null,
      status: 'stored',
    });
    const download = await fetch(`${server.baseUrl}/v1/media/${data!.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/jpeg');
    expect(download.headers.get('content-length')).toBe('200000');
    expect(download.headers.get('etag')).toBe(`"${sha256(bytes)}"`);
    expect(download.headers.get('accept-ranges')).toBe('bytes');
    expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
    // Stored under the workspace's directory by the media id, never by the client's file name.
    expect(await filesUnder(path.join(dir, ws.workspaceId))).toEqual([path.join(dir, ws.workspaceId, data!.id)]);
  });

  it('when the file name carries a right-to-left override, other bidirectional controls or DEL, or comes in NFD, then it is cleaned as a received one is', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await ws.api.POST('/media', {
      params: { query: { filename: '\u2066fatura\u202efdp.exe\u2069\u007f Relato\u0301rio.pdf' } },
      body: randomBytes(100) as unknown as string,
      bodySerializer: (body: unknown) => body as Buffer,
      headers: { 'content-type': 'application/pdf' },
    });

    expect(response.status).toBe(201);
    expect(data!.filename).toBe('faturafdp.exe Relat\u00f3rio.pdf');
  });

  it('when the ETag is sent back, then 304; when a range is asked, then 206 with those bytes; outside the file, 416', async () => {
    const ws = await createWorkspace(server);
    const bytes = randomBytes(10_000);
    const created = await upload(ws.apiKey, bytes, 'application/pdf', '?filename=nota.pdf');
    const url = `/v1/media/${created.body.id}`;

    const cached = await request(server, 'GET', url, { apiKey: ws.apiKey, headers: { 'if-none-match': `"${sha256(bytes)}"` } });
    expect(cached.status).toBe(304);
    expect(cached.headers.get('etag')).toBe(`"${sha256(bytes)}"`);

    const part = await fetch(`${server.baseUrl}${url}`, { headers: { authorization: `Bearer ${ws.apiKey}`, range: 'bytes=100-199' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 100-199/10000');
    expect(part.headers.get('content-length')).toBe('100');
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(100, 200))).toBe(true);

    const tail = await fetch(`${server.baseUrl}${url}`, { headers: { authorization: `Bearer ${ws.apiKey}`, range: 'bytes=-10' } });
    expect(tail.status).toBe(206);
    expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(9_990))).toBe(true);

    const outside = await request(server, 'GET', url, { apiKey: ws.apiKey, headers: { range: 'bytes=10000-' } });
    expect(outside.status).toBe(416);
    expect(outside.body.error.code).toBe('range_not_satisfiable');
    expect(outside.headers.get('content-range')).toBe('bytes */10000');

    // If-Range: the range holds for the file the client has (its ETag); another, or a date, gets the whole file.
    const same = await fetch(`${server.baseUrl}${url}`, {
      headers: { authorization: `Bearer ${ws.apiKey}`, range: 'bytes=0-9', 'if-range': `"${sha256(bytes)}"` },
    });
    expect([same.status, same.headers.get('content-range')]).toEqual([206, 'bytes 0-9/10000']);
    for (const ifRange of ['"another"', 'Sun, 06 Dec 2026 17:00:00 GMT']) {
      const whole = await fetch(`${server.baseUrl}${url}`, { headers: { authorization: `Bearer ${ws.apiKey}`, range: 'bytes=0-9', 'if-range': ifRange } });
      expect([whole.status, whole.headers.get('content-length'), whole.headers.get('content-range')]).toEqual([200, '10000', null]);
      await whole.arrayBuffer();
    }
  });

  it('when clients leave downloads (after every byte, or midway), then nothing is logged as a fault of the store', async () => {
    // What the server logged before (at its start: REDIS_URL unset, say) is not this test's.
    const logged = logs.lines.length;
    const ws = await createWorkspace(server);
    const bytes = randomBytes(2_000_000);
    const created = await upload(ws.apiKey, bytes, 'application/pdf');
    /** Reads `take` bytes of the file (its headers first), then closes the connection at once. */
    const leaveAfter = (take: number) =>
      new Promise<number>((resolve, reject) => {
        const req = http.get(`${server.baseUrl}/v1/media/${created.body.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` }, agent: false }, (res) => {
          let got = 0;
          res.on('data', (chunk: Buffer) => {
            got += chunk.length;
            if (got >= take) req.destroy();
          });
          res.on('close', () => resolve(got));
        });
        req.on('error', (err) => (err.message === 'socket hang up' ? undefined : reject(err)));
      });
    // Every byte read, then closed at once, as a client that counted Content-Length leaves (CI's generated client once did, before the server's end of the stream).
    for (let i = 0; i < 10; i++) expect(await leaveAfter(bytes.length)).toBe(bytes.length);
    expect(await leaveAfter(64 * 1024)).toBeLessThan(bytes.length);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(
      logs.lines
        .slice(logged)
        .filter((line) => line.level >= 40)
        .map((line) => line.msg),
    ).toEqual([]);
  });

  it('when the store fails in the middle of a download, then the response is cut short of its Content-Length and a warning is logged', async () => {
    const ws = await createWorkspace(server);
    const bytes = randomBytes(300_000);
    const created = await upload(ws.apiKey, bytes, 'application/pdf');
    // A store that serves the first 64 KiB of a file, then fails (a disk error, an S3 connection reset).
    const real = fileStore(dir);
    const failing: MediaStore = {
      ...real,
      async get(key, range) {
        const source = await real.get(key, range);
        let sent = 0;
        return source.pipe(
          new Transform({
            transform(chunk: Buffer, _encoding, done) {
              sent += chunk.length;
              if (sent > 64 * 1024) {
                source.destroy();
                return done(new Error('the store failed midway'));
              }
              done(null, chunk);
            },
          }),
        );
      },
    };
    const storeLogs = new LogCapture();
    const second = await startServer({ db: server.db, config: { mediaStore: { kind: 'file', dir } }, media: failing, logs: storeLogs.destination });
    try {
      const answer = await new Promise<{ status: number; length: string | undefined; got: number; complete: boolean }>((resolve, reject) => {
        http
          .get(`${second.baseUrl}/v1/media/${created.body.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` }, agent: false }, (res) => {
            let got = 0;
            res.on('data', (chunk: Buffer) => (got += chunk.length));
            res.on('close', () => resolve({ status: res.statusCode!, length: res.headers['content-length'], got, complete: res.complete }));
          })
          .on('error', (err) => (err.message === 'aborted' || err.message === 'socket hang up' ? undefined : reject(err)));
      });

      expect(answer).toMatchObject({ status: 200, length: String(bytes.length), complete: false });
      expect(answer.got).toBeLessThan(bytes.length);
      await until(async () => storeLogs.lines.some((line) => line.level === 40 && line.msg === 'media download cut short'), 'the warning');
      expect(storeLogs.lines.find((line) => line.msg === 'media download cut short')).toMatchObject({ mediaId: created.body.id });
    } finally {
      await second.close();
    }
  });

  it('when another workspace asks for the id, then 404, as for an unknown id', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const created = await upload(ws.apiKey, randomBytes(100), 'text/plain');

    const theirs = await request(server, 'GET', `/v1/media/${created.body.id}`, { apiKey: other.apiKey });
    const unknown = await request(server, 'GET', '/v1/media/01936b20-7c8d-7e9f-8a0b-1c2d3e4f5a6b', { apiKey: ws.apiKey });

    expect(theirs.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(theirs.body.error.code).toBe('not_found');
  });

  it('when the type is not taken, then 415 and nothing is stored', async () => {
    const ws = await createWorkspace(server);

    const gif = await upload(ws.apiKey, randomBytes(100), 'image/gif');
    const json = await upload(ws.apiKey, Buffer.from('{}'), 'application/json');

    expect(gif.status).toBe(415);
    expect(gif.body.error.code).toBe('unsupported_media_type');
    expect(json.status).toBe(415);
    expect(await mediaRows(ws.workspaceId)).toBe(0);
  });

  it('when the Content-Length is over the type limit, then 413 before the body is read, and nothing is stored', async () => {
    const ws = await createWorkspace(server);

    // Declares 5 MiB + 1 and sends nothing: the answer cannot wait for the body.
    const answer = await rawRequest(ws.apiKey, { 'content-type': 'image/png', 'content-length': String(5 * 2 ** 20 + 1) }, (req) => req.flushHeaders());

    expect(answer).toMatchObject({ status: 413 });
    expect(JSON.parse((answer as { body: string }).body).error.code).toBe('payload_too_large');
    expect(await mediaRows(ws.workspaceId)).toBe(0);
  });

  it('when a file over its limit is sent whole by a client of its own process, then it reads the 413 every time, not a reset, and nothing is stored', async () => {
    const ws = await createWorkspace(server);
    const outcomes: Array<number | string> = [];
    // A 6 MB photo (the limit is 5 MB), five times: small enough to spare the machine the suite shares.
    const headers = { authorization: `Bearer ${ws.apiKey}`, 'content-type': 'image/jpeg' };
    outcomes.push(...(await fetchFromAnotherProcess(`${server.baseUrl}/v1/media`, { headers, size: 6 * 2 ** 20, times: 5 })));
    expect(outcomes).toEqual(Array.from({ length: 5 }, () => 413));
    expect(await mediaRows(ws.workspaceId)).toBe(0);
  });

  it('when a chunked body passes the limit, then 413, and nothing is stored', async () => {
    const ws = await createWorkspace(server);
    const chunk = randomBytes(64 * 1024);

    const answer = await rawRequest(ws.apiKey, { 'content-type': 'image/webp', 'transfer-encoding': 'chunked' }, (req) => {
      // 500 KB is a sticker's limit: 9 chunks of 64 KB pass it; keep writing until the server answers.
      const timer = setInterval(() => req.write(chunk), 5);
      req.on('response', () => clearInterval(timer));
      req.on('error', () => clearInterval(timer));
      req.on('close', () => clearInterval(timer));
    });

    expect(answer).toMatchObject({ status: 413 });
    expect(await mediaRows(ws.workspaceId)).toBe(0);
    await until(async () => (await filesUnder(path.join(dir, '.spool'))).length === 0, 'the spool to be empty');
  });

  it('when the upload is cut short, then nothing is stored and its spooled part is removed', async () => {
    const ws = await createWorkspace(server);
    let sent!: http.ClientRequest;

    const answer = rawRequest(ws.apiKey, { 'content-type': 'audio/ogg', 'content-length': '100000' }, (req) => {
      sent = req;
      req.write(randomBytes(50_000));
    });
    await until(async () => (await filesUnder(path.join(dir, '.spool'))).length > 0, 'the upload to be spooled');
    sent.destroy();

    expect(await answer).toHaveProperty('error');
    await until(async () => (await filesUnder(path.join(dir, '.spool'))).length === 0, 'the spooled part to be removed');
    expect(await mediaRows(ws.workspaceId)).toBe(0);
  });

  it('when the key lacks messages:write, then 403 before the body is read', async () => {
    const ws = await createWorkspace(server, { scopes: ['messages:read'] });

    const answer = await upload(ws.apiKey, randomBytes(10), 'image/png');

    expect(answer.status).toBe(403);
    expect(await mediaRows(ws.workspaceId)).toBe(0);
  });

  it('when the same upload is retried with its Idempotency-Key, then the first attachment is replayed and one file is stored', async () => {
    const ws = await createWorkspace(server);
    const bytes = randomBytes(1_000);

    const first = await upload(ws.apiKey, bytes, 'video/mp4', '', { 'idempotency-key': 'upload-1' });
    const again = await upload(ws.apiKey, bytes, 'video/mp4', '', { 'idempotency-key': 'upload-1' });
    const other = await upload(ws.apiKey, randomBytes(1_000), 'video/mp4', '', { 'idempotency-key': 'upload-1' });

    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(other.status).toBe(422);
    expect(await mediaRows(ws.workspaceId)).toBe(1);
  });
});
