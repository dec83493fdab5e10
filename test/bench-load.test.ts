// The bench's load generator on a machine without wrk (a fresh clone): the autocannon fallback runs
// in a process of its own, given request bodies that no command line could hold (2,000 of them, as
// the POST /v1/messages scenario has), and cycles through them.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findWrk, makeWorkDir, runLoad } from '../bench/lib/load.js';

let server: http.Server;
let url: string;
const bodies = new Map<string, number>();
let workDir: string;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  workDir = makeWorkDir();
  // No wrk on the PATH, whether or not this machine has one: its directories go, sh stays.
  const shOnly = fs.mkdtempSync(path.join(workDir, '..', 'sf-bench-path-'));
  fs.symlinkSync('/bin/sh', path.join(shOnly, 'sh'));
  process.env.PATH = [shOnly, ...(process.env.PATH ?? '').split(path.delimiter).filter((dir) => !fs.existsSync(path.join(dir, 'wrk')))].join(path.delimiter);
  cleanups.push(() => fs.rmSync(shOnly, { recursive: true, force: true }));
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      bodies.set(body, (bodies.get(body) ?? 0) + 1);
      res.writeHead(201, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/messages`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(workDir, { recursive: true, force: true });
  for (const cleanup of cleanups) cleanup();
});

describe('the bench load generator without wrk', () => {
  it('when 2,000 request bodies (over 128 KiB) are given, then autocannon sends them, cycling, and counts the answers', async () => {
    const variants = Array.from({ length: 2_000 }, (_, i) => ({
      body: JSON.stringify({
        contactId: `01935f50-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`,
        channelId: '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f',
        content: 'Olá! Seu pedido foi enviado.',
      }),
    }));
    expect(JSON.stringify(variants).length).toBeGreaterThan(128 * 1024);

    const result = await runLoad({ url, method: 'POST', headers: { 'content-type': 'application/json' }, variants, connections: 4, durationS: 1 }, workDir);

    expect(findWrk()).toBeNull();
    expect(result).toMatchObject({ tool: 'autocannon', non2xx: 0, socketErrors: 0 });
    expect(result.requests).toBeGreaterThan(10);
    const sent = [...bodies.keys()];
    expect(sent.length).toBeGreaterThan(1);
    expect(sent.every((body) => variants.some((v) => v.body === body))).toBe(true);
    expect(fs.readdirSync(workDir)).toEqual([]);
  }, 60_000);
});
