// Who is woken when an event commits (src/stream/announce.ts, leases.ts): the statement recording an
// event sends `NOTIFY events_added` (the event log's `stream` consumer) only for a workspace some
// instance streams (an unexpired lease), so while nobody streams a workspace its events wake no
// listener; once a stream opens they do again, and the stream misses nothing across the switch: not
// the events committed while it opens, nor one whose transaction wrote it before the lease existed
// (no notification ever comes for it). Since migration 0030 no trigger on `events` announces anything:
// the consumer is the one announcer. With DATABASE_URL, real PostgreSQL LISTEN/NOTIFY.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM } from '../src/actor.js';
import { recordChangeEvent, recordEvent } from '../src/events/record.js';
import { createJobListener, type JobListener } from '../src/jobs/listen.js';
import { createLogger } from '../src/logger.js';
import { EVENTS_CHANNEL } from '../src/stream/hub.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { createWorkspace } from './helpers/api.js';
import { waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type TestServer } from './helpers/server.js';
import { openStream, type SseStream } from './helpers/sse.js';

let server: TestServer;
let listener: JobListener;
/** Every `events_added` payload heard, in order. */
const heard: string[] = [];

/** A listener on `events_added` of `db`'s database, heard into `into`, ready (its own notification heard). */
async function listenTo(db: Db, url: string | undefined, into: string[]): Promise<JobListener> {
  const listening = createJobListener({ db, databaseUrl: url, logger: createLogger('silent'), channel: EVENTS_CHANNEL });
  listening.subscribe((payload) => void into.push(payload));
  // Listening starts on a connection of its own: markers until one is heard.
  for (let attempt = 0; ; attempt++) {
    try {
      await mark(500, db, into);
      return listening;
    } catch (err) {
      if (attempt === 20) throw err;
    }
  }
}

beforeAll(async () => {
  // Leases renewed every 100 ms, so a workspace left without streams is let go at once.
  server = await startServer({ streams: { leaseMs: 300 } });
  listener = await listenTo(server.db, databaseUrl, heard);
});
afterAll(async () => {
  await listener.close();
  await server.close();
});

/**
 * Sends a notification of its own and waits for it: PostgreSQL delivers a channel's notifications
 * in commit order, so any notification of a transaction committed before has been heard by then.
 */
async function mark(timeoutMs = 5_000, db = server.db, into = heard): Promise<void> {
  const marker = `marker-${randomUUID()}`;
  await sql`select pg_notify(${EVENTS_CHANNEL}, ${marker})`.execute(db);
  await waitFor('our own notification', () => into.includes(marker), timeoutMs);
}

/** The transaction that wrote the event, as its notification names it. */
async function writerOf(db: Db, eventId: string): Promise<string> {
  const { rows } = await sql<{ xid: string }>`select commit_xid::text as xid from events where id = ${eventId}::uuid`.execute(db);
  return rows[0]!.xid;
}

const record = (workspaceId: string, i: number): Promise<string> => recordEvent(server.db, workspaceId, 'nps.answered', { id: `n-${i}`, score: 9 }, SYSTEM);

const leaseOf = async (workspaceId: string, db = server.db): Promise<number> =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from stream_listeners where workspace_id = ${workspaceId}::uuid and expires_at > now()`.execute(db)).rows[0]!
      .n,
  );

const waitForEvents = (stream: SseStream, count: number, timeoutMs = 10_000): Promise<void> =>
  waitFor(`${count} events on the stream (have ${stream.events().length})`, () => stream.events().length >= count, timeoutMs);

describe('NOTIFY events_added only for streamed workspaces', () => {
  it('when no stream of the workspace is open, then its events send no notification; once one opens they do, and after it closes they stop again', async () => {
    const ws = await createWorkspace(server);
    const quiet = await record(ws.workspaceId, 0);
    await mark();
    expect(heard).not.toContain(await writerOf(server.db, quiet));

    const stream = await openStream(server.baseUrl, { key: ws.apiKey });
    await waitFor('the lease', async () => (await leaseOf(ws.workspaceId)) === 1, 5_000);
    const live = await record(ws.workspaceId, 1);
    await waitForEvents(stream, 1);
    await mark();
    expect(heard).toContain(await writerOf(server.db, live));
    expect(stream.events().map((f) => f.id)).toEqual([live]);

    stream.close();
    await waitFor('the lease let go', async () => (await leaseOf(ws.workspaceId)) === 0, 5_000);
    const after = await record(ws.workspaceId, 2);
    await mark();
    expect(heard).not.toContain(await writerOf(server.db, after));
  });

  it('when a streamed workspace gets a row in events by SQL other than the event log’s statement, then nothing announces it (no trigger since migration 0030) and the stream still reads it from the log', async () => {
    const ws = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey });
    try {
      await waitFor('the lease', async () => (await leaseOf(ws.workspaceId)) === 1, 5_000);
      const id = randomUUID();
      await sql`insert into events (workspace_id, id, type, data, created_at) values (${ws.workspaceId}::uuid, ${id}::uuid, 'nps.answered', '{}'::jsonb, now())`.execute(
        server.db,
      );
      // The instance reads the log every second without a notification (fallbackPollMs).
      await waitForEvents(stream, 1);
      await mark();

      expect(stream.events().map((f) => f.id)).toEqual([id]);
      expect(heard).not.toContain(await writerOf(server.db, id));
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_trigger where tgrelid = 'events'::regclass and not tgisinternal`.execute(
        server.db,
      );
      expect(rows[0]!.n).toBe(0);
    } finally {
      stream.close();
    }
  });

  it('when a change and its event are one statement (recordChangeEvent) on a streamed workspace, then it announces the writing transaction if the change applied, and nothing if it did not', async () => {
    const ws = await createWorkspace(server);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey });
    /** A change that applies when `applies`, recorded with its event as the services do. */
    const change = (applies: boolean): Promise<boolean> =>
      recordChangeEvent(
        server.db,
        ws.workspaceId,
        'nps.answered',
        {
          with: sql`changed as (select ${applies}::boolean as applied)`,
          source: sql`select '{"score": 9}'::jsonb as data, null::uuid as contact_id from changed where applied`,
        },
        SYSTEM,
      );
    try {
      await waitFor('the lease', async () => (await leaseOf(ws.workspaceId)) === 1, 5_000);
      const before = heard.length;
      expect(await change(false)).toBe(false);
      await mark();
      expect(heard.slice(before).filter((payload) => /^\d+$/.test(payload))).toEqual([]);

      expect(await change(true)).toBe(true);
      await waitForEvents(stream, 1);
      await mark();
      const id = stream.events()[0]!.id!;
      expect(heard.slice(before).filter((payload) => /^\d+$/.test(payload))).toEqual([await writerOf(server.db, id)]);
    } finally {
      stream.close();
    }
  });

  it("when another workspace is streamed, then this workspace's events still send no notification", async () => {
    const [streamed, other] = [await createWorkspace(server), await createWorkspace(server)];
    const stream = await openStream(server.baseUrl, { key: streamed.apiKey });
    try {
      await waitFor('the lease', async () => (await leaseOf(streamed.workspaceId)) === 1, 5_000);
      const unheard = await record(other.workspaceId, 0);
      await mark();
      expect(heard).not.toContain(await writerOf(server.db, unheard));
    } finally {
      stream.close();
    }
  });

  it('when a lease has expired (its instance died), then it wakes nobody', async () => {
    const ws = await createWorkspace(server);
    await sql`insert into stream_listeners (workspace_id, instance_id, expires_at) values (${ws.workspaceId}::uuid, ${randomUUID()}::uuid, now() - interval '1 second')`.execute(
      server.db,
    );
    const unheard = await record(ws.workspaceId, 0);
    await mark();
    expect(heard).not.toContain(await writerOf(server.db, unheard));
  });

  it('when a stream resumes while events keep committing (before its lease, while it is taken, after), then it gets every event after its Last-Event-ID once, in order', async () => {
    const ws = await createWorkspace(server);
    const committed = [await record(ws.workspaceId, 0)];
    let writing = true;
    const writer = (async () => {
      for (let i = 1; writing || i < 30; i++) {
        committed.push(await record(ws.workspaceId, i));
        // PGlite answers without I/O: let the server and the stream run between commits.
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    await waitFor('some events before the stream opens', () => committed.length >= 10, 10_000);
    const stream = await openStream(server.baseUrl, { key: ws.apiKey, lastEventId: committed[0] });
    const atOpen = committed.length;
    try {
      await waitFor('events committed after the stream opened', () => stream.events().length >= atOpen + 10, 15_000);
      writing = false;
      await writer;
      await waitForEvents(stream, committed.length - 1);

      expect(stream.events().map((f) => f.id)).toEqual(committed.slice(1));
    } finally {
      writing = false;
      stream.close();
    }
  });

  // PGlite has one connection: the open transaction would hold back the stream's own queries.
  it.skipIf(!databaseUrl)(
    'when an event was written before the lease was taken and commits after, then it arrives at once though no notification names it (needs DATABASE_URL)',
    async () => {
      // In a database of its own: the open transaction holds back every stream of its database, and
      // the run's is shared by the test files running alongside (their streams' timed checks).
      const own = await ownDatabase();
      const db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 3 });
      const ownHeard: string[] = [];
      const ownListener = await listenTo(db, own.url, ownHeard);
      // The log is read every minute only: the event can come only from the look the lease asks for.
      const slow = await startServer({ db, databaseUrl: own.url, streams: { fallbackPollMs: 60_000 } });
      try {
        const ws = await createWorkspace(slow);
        let stream: SseStream | undefined;
        let eventId = '';
        await db.transaction().execute(async (trx) => {
          eventId = await recordEvent(trx, ws.workspaceId, 'nps.answered', { id: 'early', score: 7 }, SYSTEM);
          stream = await openStream(slow.baseUrl, { key: ws.apiKey });
          await waitFor('the lease', async () => (await leaseOf(ws.workspaceId, db)) === 1, 5_000);
        });
        // Within the wait, well before the instance's once-a-minute read: the lease's own look brought it.
        await waitForEvents(stream!, 1, 5_000);
        stream!.close();

        expect(stream!.events().map((f) => f.id)).toEqual([eventId]);
        await mark(5_000, db, ownHeard);
        expect(ownHeard).not.toContain(await writerOf(db, eventId));
      } finally {
        await slow.close();
        await ownListener.close();
        await db.destroy();
        await own.drop();
      }
    },
  );
});
