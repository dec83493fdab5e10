// GET /events/stream (Server-Sent Events) and POST /events/stream-tokens: live delivery as events
// commit, the types filter, Last-Event-ID resume with no gap and no duplicate while commits keep
// coming, two instances sharing the database, isolation, revoked keys, slow clients, keep-alives,
// tokens for browsers, and the 400/401/403 answers.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../src/db/api-keys.js';
import { recordEvent } from '../src/events/record.js';
import { SYSTEM } from '../src/actor.js';
import { createStreamToken } from '../src/stream/tokens.js';
import { createDatabase } from '../src/db/database.js';
import { buildContact, createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, startServer, type TestServer } from './helpers/server.js';
import { openStream, type SseStream } from './helpers/sse.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

async function createContact(ws: TestWorkspace): Promise<string> {
  const { data, response } = await ws.api.POST('/contacts', { body: buildContact() });
  expect(response.status).toBe(201);
  return data!.id;
}

/** The id of the contact.created event of `contactId`, from the log. */
async function eventOfContact(ws: TestWorkspace, contactId: string): Promise<string> {
  const { data } = await ws.api.GET('/events', { params: { query: { type: 'contact.created', limit: 100 } } });
  return data!.data.find((e) => (e.data.object as { id: string }).id === contactId)!.id;
}

/** The ids of all the workspace's events, from the log. */
async function allEventIds(ws: TestWorkspace): Promise<string[]> {
  const ids: string[] = [];
  for (let page = 1; ; page++) {
    const { data } = await ws.api.GET('/events', { params: { query: { page, limit: 100 } } });
    ids.push(...data!.data.map((e) => e.id));
    if (data!.data.length < 100) return ids;
  }
}

const waitForEvents = (stream: SseStream, count: number, timeoutMs = 10_000): Promise<void> =>
  waitFor(`${count} events on the stream (have ${stream.events().length})`, () => stream.events().length >= count, timeoutMs);

describe('GET /events/stream', () => {
  it('when a change commits, then the stream sends its event at once as id/event/data, the data as GET /events/{id} answers it', async () => {
    // "At once" without timing the machine: this instance reads the log by itself only once a
    // minute, so within the wait below only the commit's notification can bring the event.
    const notified = await startServer({ db: server.db, streams: { fallbackPollMs: 60_000 } });
    const ws = await createWorkspace(notified);
    const stream = await openStream(notified.baseUrl, { key: ws.apiKey });
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      expect(stream.headers['cache-control']).toBe('no-store');
      expect(stream.headers['access-control-allow-origin']).toBe('*');

      const contactId = await createContact(ws);
      await waitForEvents(stream, 1);

      const [frame] = stream.events();
      const eventId = await eventOfContact(ws, contactId);
      const { data: logged } = await ws.api.GET('/events/{id}', { params: { path: { id: eventId } } });
      expect(frame).toEqual({ id: eventId, event: 'contact.created', data: JSON.stringify(logged) });
    } finally {
      stream.close();
      await notified.close();
    }
  });

  // PGlite has one connection: the open transaction would hold back the stream's own queries.
  it.skipIf(!databaseUrl)("when an event commits as a stream's headers arrive on a busy instance, then it is on the stream (needs DATABASE_URL)", async () => {
    const ws = await createWorkspace(server);
    // One connection for the instance: eight streams opening at once queue their queries on it.
    const small = createDatabase({ databaseUrl, pgliteDir: 'memory://', poolSize: 1 });
    const busy = await startServer({ db: small });
    let opening: Promise<SseStream>[] = [];
    try {
      let eventId = '';
      let first!: SseStream;
      await server.db.transaction().execute(async (trx) => {
        eventId = await recordEvent(trx, ws.workspaceId, 'nps.answered', { id: 'as-it-opens', score: 7 }, SYSTEM);
        opening = Array.from({ length: 8 }, () => openStream(busy.baseUrl, { key: ws.apiKey }));
        first = await Promise.race(opening);
      });
      // The event committed after the first stream said it was open: that stream must send it.
      await waitForEvents(first, 1);

      expect(first.events().map((f) => f.id)).toEqual([eventId]);
    } finally {
      for (const stream of await Promise.all(opening)) stream.close();
      await busy.close();
      await small.destroy();
    }
  });

  it('when ?types= names some types, then only those are sent', async () => {
    const ws = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey, types: 'thread.created,nps.answered' });
    try {
      const contactId = await createContact(ws);
      const { response } = await ws.api.POST('/threads', { body: { contactId, channelId: ws.channels[0]!.id } });
      expect(response.status).toBe(201);
      await waitForEvents(stream, 1);

      // The contact's event committed first: had it passed the filter, it would have come first.
      expect(stream.events().map((f) => f.event)).toEqual(['thread.created']);
    } finally {
      stream.close();
    }
  });

  it('when the request is a HEAD, then it is answered and the connection ends: no stream is opened', async () => {
    const ws = await createWorkspace(server);
    const socket = net.connect(Number(new URL(server.baseUrl).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write(`HEAD /v1/events/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${ws.apiKey}\r\n\r\n`);
    try {
      // Asked to close the connection after the answer: the server does so once the answer has ended.
      await closed;

      // HEAD is GET without the body (the validator checks it as its GET): the stream's handler
      // answers the stream's headers and ends (src/routes/events.ts).
      const [head, body] = received.split('\r\n\r\n');
      expect(head).toMatch(/^HTTP\/1\.1 200 /);
      expect(head).toMatch(/^content-type: text\/event-stream; charset=utf-8$/im);
      expect(body).toBe('');
    } finally {
      socket.destroy();
    }
  });

  it('when ?types= holds an unknown type, then it is a 400 naming the parameter', async () => {
    const ws = await createWorkspace(server);
    const response = await request(server, 'GET', '/v1/events/stream?types=contact.created,contact.exploded', {
      headers: { authorization: `Bearer ${ws.apiKey}` },
    });

    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('validation_error');
    expect(JSON.stringify(response.body.error.details)).toContain('/query/types');
  });

  it('when ?types= is sent once per type (as generic clients send arrays) instead of comma-separated, then it reads as the same list', async () => {
    const ws = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey, types: ['thread.created', 'contact.updated'] });
    try {
      const contactId = await createContact(ws);
      await ws.api.PATCH('/contacts/{id}', { params: { path: { id: contactId } }, body: { name: 'Outro Nome' } });
      const { response } = await ws.api.POST('/threads', { body: { contactId, channelId: ws.channels[0]!.id } });
      expect(response.status).toBe(201);
      await waitForEvents(stream, 2);

      expect(stream.events().map((f) => f.event)).toEqual(['contact.updated', 'thread.created']);
    } finally {
      stream.close();
    }
  });

  it('when the client reconnects with Last-Event-ID again and again while changes keep committing, then it gets every event once, in one order', async () => {
    const ws = await createWorkspace(server);
    let writing = true;
    const written: string[] = [];
    const failures: unknown[] = [];
    // The first stream opens before any change: every event of the workspace is then after its start.
    let stream = await openStream(server.baseUrl, { key: ws.apiKey });
    const writers = Array.from({ length: 4 }, async () => {
      while (writing) {
        const { data, response, error } = await ws.api.POST('/contacts', { body: buildContact() });
        if (response.status === 201) written.push(data!.id);
        else failures.push(error);
      }
    });
    const received: string[] = [];
    let last: string | undefined;
    try {
      for (let session = 0; session < 6; session++) {
        if (session > 0) stream = await openStream(server.baseUrl, { key: ws.apiKey, lastEventId: last! });
        await waitFor('5 events on the stream', () => {
          expect(failures).toEqual([]);
          return stream.events().length >= 5;
        });
        stream.close();
        // What arrived before the close is what the client saw.
        const seen = stream.events();
        expect(stream.frames.some((f) => f.event === 'reset')).toBe(false);
        received.push(...seen.map((f) => f.id!));
        last = seen.at(-1)!.id;
      }
    } finally {
      writing = false;
      await Promise.all(writers);
    }
    // A last session reads up to the last change made.
    const lastEventId = await eventOfContact(ws, written.at(-1)!);
    const tail = await openStream(server.baseUrl, { key: ws.apiKey, lastEventId: last! });
    try {
      await waitFor('the last change on the stream', () => tail.events().some((f) => f.id === lastEventId));
      const all = await allEventIds(ws);
      await waitForEvents(tail, all.length - received.length);
      received.push(...tail.events().map((f) => f.id!));
    } finally {
      tail.close();
    }

    expect(new Set(received).size).toBe(received.length);
    expect([...received].sort()).toEqual((await allEventIds(ws)).sort());
  }, 60_000);

  it("when Last-Event-ID is unknown here (made up, or another workspace's), then the stream opens with event: reset, data: {}, then live events", async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const othersEvent = await eventOfContact(other, await createContact(other));
    for (const lastEventId of ['01936a12-4d5e-7f6a-8b7c-9d0e1f2a3b4c', othersEvent, 'not-an-id']) {
      const stream = await openStream(server.baseUrl, { key: ws.apiKey, lastEventId });
      try {
        await waitFor('the reset frame', () => stream.frames.length > 0);
        expect(stream.frames[0]).toEqual({ id: undefined, event: 'reset', data: '{}' });
        const contactId = await createContact(ws);
        await waitForEvents(stream, 1);
        expect(stream.events().map((f) => f.id)).toEqual([await eventOfContact(ws, contactId)]);
      } finally {
        stream.close();
      }
    }
  });

  it('when lastEventId is in the query (a new EventSource), then the stream resumes after it', async () => {
    const ws = await createWorkspace(server);
    const first = await eventOfContact(ws, await createContact(ws));
    const second = await eventOfContact(ws, await createContact(ws));
    const stream = await openStream(server.baseUrl, { key: ws.apiKey, query: { lastEventId: first } });
    try {
      await waitForEvents(stream, 1);
      expect(stream.events().map((f) => f.id)).toEqual([second]);
    } finally {
      stream.close();
    }
  });

  it("when another workspace's changes commit, then they never reach this workspace's stream", async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey });
    try {
      await createContact(other);
      await createContact(other);
      const mine = await createContact(ws);
      await waitForEvents(stream, 1);

      expect(stream.events().map((f) => f.id)).toEqual([await eventOfContact(ws, mine)]);
    } finally {
      stream.close();
    }
  });
});

describe('GET /events/stream across instances', () => {
  it("when a change commits through one instance, then a stream on another instance sharing the database gets it by the commit's notification", async () => {
    // The second instance reads the log by itself once a minute: within the wait, only the notification brings the event.
    const second = await startServer({ db: server.db, streams: { fallbackPollMs: 60_000 } });
    try {
      const ws = await createWorkspace(server);
      const stream = await openStream(second.baseUrl, { key: ws.apiKey });
      try {
        const contactId = await createContact(ws);
        await waitForEvents(stream, 1);

        expect(stream.events()[0]!.id).toBe(await eventOfContact(ws, contactId));
      } finally {
        stream.close();
      }
    } finally {
      await second.close();
    }
  });
});

describe('closing streams', () => {
  it('when the key is revoked, then its stream is closed with a comment saying so', async () => {
    const quick = await startServer({ db: server.db, streams: { keyCheckMs: 200 } });
    try {
      const ws = await createWorkspace(quick);
      const { data: made } = await ws.api.POST('/events/stream-tokens');
      const byKey = await openStream(quick.baseUrl, { key: ws.apiKey });
      const byToken = await openStream(quick.baseUrl, { token: made!.token });
      expect([byKey.status, byToken.status]).toEqual([200, 200]);

      await revokeApiKey(quick.db, ws.keyId);
      await Promise.all([byKey.ended, byToken.ended]);

      expect(byKey.comments).toContain('the API key was revoked');
      expect(byToken.comments).toContain('the API key was revoked');
    } finally {
      await quick.close();
    }
  });

  it('when a client stops reading, then past the buffer limit its stream is closed with a comment, and it resumes with Last-Event-ID', async () => {
    const limit = 256 * 1024;
    const small = await startServer({ db: server.db, streams: { bufferLimitBytes: limit } });
    try {
      const ws = await createWorkspace(small);
      const socket = net.connect(Number(new URL(small.baseUrl).port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.write(`GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ws.apiKey}\r\n\r\n`);
      await waitFor('the headers', () => received.includes('\r\n\r\n'));
      socket.pause();

      // 12 MB of events: more than the socket buffers the kernel gives a reader that does not read.
      const padding = 'x'.repeat(4_000);
      const total = 3_000;
      for (let i = 0; i < total; i += 20) {
        await Promise.all(
          Array.from({ length: 20 }, () => recordEvent(small.db, ws.workspaceId, 'contact.created', { id: crypto.randomUUID(), padding }, SYSTEM)),
        );
      }
      socket.resume();
      await Promise.race([closed, new Promise((r) => setTimeout(r, 3000))]);
      console.log('RECEIVED', JSON.stringify(received));

      expect(received).toContain(`: closed: the client reads too slowly (over ${limit} bytes waiting); reconnect with Last-Event-ID`);
      const ids = [...received.matchAll(/^id: (\S+)$/gm)].map((m) => m[1]!);
      expect(ids.length).toBeLessThan(total);
      // As EventSource does: reconnect with the last id until everything has come.
      for (let attempt = 0; attempt < 10 && ids.length < total; attempt++) {
        const stream = await openStream(small.baseUrl, { key: ws.apiKey, lastEventId: ids.at(-1)! });
        await Promise.race([waitFor('the rest', () => ids.length + stream.events().length >= total, 30_000), stream.ended]);
        stream.close();
        ids.push(...stream.events().map((f) => f.id!));
      }
      expect(ids).toHaveLength(total);
      expect(new Set(ids).size).toBe(total);
      socket.destroy();
    } finally {
      await small.close();
    }
  }, 90_000);

  it('when nothing happens for the keep-alive interval, then a ": keepalive" comment comes', async () => {
    const chatty = await startServer({ db: server.db, streams: { keepAliveMs: 100 } });
    try {
      const ws = await createWorkspace(chatty);
      const stream = await openStream(chatty.baseUrl, { key: ws.apiKey });
      await waitFor('a keep-alive', () => stream.comments.includes('keepalive'), 3_000);
      stream.close();
    } finally {
      await chatty.close();
    }
  });

  it('when the instance stops, then its streams end at once with a comment saying why', async () => {
    const stopping = await startServer({ db: server.db });
    const ws = await createWorkspace(stopping);
    const stream = await openStream(stopping.baseUrl, { key: ws.apiKey });

    await stopping.close();
    await stream.ended;

    expect(stream.comments).toContain('the server is shutting down; reconnect with Last-Event-ID');
  });
});

describe('stream tokens', () => {
  it("when a token is made, then it is 201 {token, expiresAt in 60 s} and opens a stream of the key's workspace with ?token=", async () => {
    const ws = await createWorkspace(server);
    const before = Date.now();
    const { data, response } = await ws.api.POST('/events/stream-tokens');

    expect(response.status).toBe(201);
    expect(data!.token).toMatch(/^sst_[0-9A-Za-z]{43}$/);
    expect(Date.parse(data!.expiresAt) - before).toBeGreaterThanOrEqual(59_000);
    expect(Date.parse(data!.expiresAt) - before).toBeLessThanOrEqual(61_000);
    const stream = await openStream(server.baseUrl, { token: data!.token });
    try {
      expect(stream.status).toBe(200);
      const contactId = await createContact(ws);
      await waitForEvents(stream, 1);
      expect(stream.events()[0]!.id).toBe(await eventOfContact(ws, contactId));
    } finally {
      stream.close();
    }
  });

  it.each([
    ['missing', undefined],
    ['malformed', 'sst_short'],
    ['unknown', `sst_${'A'.repeat(43)}`],
    ['expired', 'expired'],
  ])('when the token is %s, then it is 401 unauthorized', async (_label, token) => {
    const ws = await createWorkspace(server);
    const value = token === 'expired' ? (await createStreamToken(server.db, ws, new Date(Date.now() - 61_000))).token : token;
    const stream = await openStream(server.baseUrl, value === undefined ? {} : { token: value });
    await stream.ended;

    expect(stream.status).toBe(401);
    expect(JSON.parse(stream.body).error.code).toBe('unauthorized');
  });

  it('when the key lacks webhooks:read, then making a token and opening a stream are 403 forbidden', async () => {
    const ws = await createWorkspace(server, { scopes: ['contacts:read'] });
    const made = await request(server, 'POST', '/v1/events/stream-tokens', { headers: { authorization: `Bearer ${ws.apiKey}` } });
    const token = await createStreamToken(server.db, ws);
    const byKey = await openStream(server.baseUrl, { key: ws.apiKey });
    const byToken = await openStream(server.baseUrl, { token: token.token });
    await Promise.all([byKey.ended, byToken.ended]);

    expect(made.status).toBe(403);
    expect([byKey.status, byToken.status]).toEqual([403, 403]);
    expect(JSON.parse(byKey.body).error).toMatchObject({ code: 'forbidden', message: 'This API key lacks the scope webhooks:read.' });
  });
});
