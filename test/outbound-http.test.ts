// The outbound HTTP client against a local server: answers read whole or by status only, the body
// cap, the time limit, abort, connection failures, redirects not followed, and a pinned request
// connecting to the checked address whatever its host name resolves to.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, postJson } from '../src/outbound/http.js';

let server: http.Server;
let base: string;
let port: number;
const received: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (req.url === '/big') return res.end(Buffer.alloc(4096, 'x'));
      if (req.url === '/silent') return; // never answers
      if (req.url === '/redirect') return res.writeHead(302, { location: '/echo' }).end();
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ got: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('the outbound HTTP client', () => {
  it('when JSON is POSTed, then it is sent with its type, length and the caller’s headers, and the answer comes back as text', async () => {
    const outcome = await postJson(`${base}/echo`, { headers: { authorization: 'Bearer t' }, body: '{"a":"é"}', timeoutMs: 5_000, maxBodyBytes: 1_024 });

    expect(outcome).toEqual({ status: 201, text: '{"got":{"a":"é"}}' });
    expect(received.at(-1)).toMatchObject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json', 'content-length': '10', authorization: 'Bearer t' },
      body: '{"a":"é"}',
    });
  });

  it('when the answer is longer than the cap, then reading the body is a network failure, and reading the status keeps the status', async () => {
    expect(await httpRequest(`${base}/big`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024 })).toEqual({
      failure: 'network',
      message: 'the answer is longer than 1024 bytes',
    });
    expect(await httpRequest(`${base}/big`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024, read: 'status' })).toEqual({
      status: 200,
      body: Buffer.alloc(0),
    });
  });

  it('when the service does not answer in time, then it is a timeout', async () => {
    expect(await httpRequest(`${base}/silent`, { method: 'GET', timeoutMs: 100, maxBodyBytes: 1_024 })).toEqual({
      failure: 'timeout',
      message: 'no answer within 100 ms',
    });
  });

  it('when the signal aborts, then the call rejects with its reason, before or during the request', async () => {
    const before = new AbortController();
    before.abort(new Error('stopping'));
    await expect(httpRequest(`${base}/echo`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024, signal: before.signal })).rejects.toThrow('stopping');

    const during = new AbortController();
    const call = httpRequest(`${base}/silent`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024, signal: during.signal });
    during.abort(new Error('stopping now'));
    await expect(call).rejects.toThrow('stopping now');
  });

  it('when nothing listens, then it is a network failure carrying node’s code', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port: freePort } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));

    expect(await httpRequest(`http://127.0.0.1:${freePort}/`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024 })).toMatchObject({
      failure: 'network',
      code: 'ECONNREFUSED',
    });
  });

  it('when the service redirects, then the redirect is the answer (not followed)', async () => {
    const before = received.length;
    expect(await httpRequest(`${base}/redirect`, { method: 'GET', timeoutMs: 5_000, maxBodyBytes: 1_024 })).toMatchObject({ status: 302 });
    expect(received.slice(before).map((r) => r.url)).toEqual(['/redirect']);
  });

  it('when the request is pinned to an address, then it connects there, whatever the host name resolves to, and sends the name as Host', async () => {
    const outcome = await postJson(`http://pinned.invalid:${port}/echo`, {
      pinTo: { address: '127.0.0.1', family: 4 },
      body: '1',
      timeoutMs: 5_000,
      maxBodyBytes: 1_024,
    });

    expect(outcome).toEqual({ status: 201, text: '{"got":1}' });
    expect(received.at(-1)!.headers.host).toBe(`pinned.invalid:${port}`);
  });
});
