// Issue 22, on PostgreSQL: an automation's effects happen exactly once per (automation, event) even
// when the process running them is killed with SIGKILL in the middle of its run. The test holds a
// lock that the run's transaction needs, so the service process is provably inside it (its
// automation-event job claimed, its session waiting on the lock) when it dies: before any effect
// (waiting for the thread), after some (the thread labelled, waiting for the contact), and with
// its COMMIT sent but not answered (a deferred trigger of this test's own database waits at
// commit). Once the lock is let go, nothing of the dead run commits in the first two cases, and
// the next process takes the job when its lease runs out; in the third the commit stands, job end
// included, and the next process only sends the message it queued. Either way: one run, one label
// change, one attribute change, one outbound message sent, the job ended.
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { provision, SCOPES, type Provisioned } from '../src/provisioning.js';
import { buildPhone, checkedClient } from './helpers/api.js';
import { freePort, waitFor, waitForExit } from './helpers/processes.js';
import { jobsLeft, waitForNoJobs } from './helpers/queue.js';
import { Service, START_MS } from './helpers/service.js';
import { databaseUrl, ownDatabase, testSecretsKey, type OwnDatabase } from './helpers/server.js';

type Schemas = components['schemas'];

if (!databaseUrl) console.log('automation-kill.test.ts: skipped, it needs DATABASE_URL (two service processes share one PostgreSQL database)');

interface Ids {
  workspaceId: string;
  threadId: string;
  contactId: string;
}

/** Where a test session stops the run's transaction, and what of it commits once let go. */
interface Hold {
  /** Run before the session holds (outside its transaction). */
  prepare?: (db: Db, ids: Ids) => Promise<void>;
  /** The lock the session takes in its open transaction. */
  lock: (ids: Ids) => string;
  /** The statement of the run that waits for it. */
  waitsIn: RegExp;
  /** The dead process's transaction commits once the lock is let go (it had sent its COMMIT). */
  commits: boolean;
}

/**
 * The run's first statement takes the thread FOR UPDATE. The test holds FOR KEY SHARE: the inbound
 * message's own writes of the thread (no key change) pass, the run's lock waits.
 */
const BEFORE_ANY_EFFECT: Hold = {
  lock: ({ threadId }) => `select id from threads where id = '${threadId}' for key share`,
  waitsIn: /\bfrom threads\b[\s\S]*\bfor update\b/i,
  commits: false,
};

/**
 * set_attribute, the second action, locks the contact FOR UPDATE to change it: the first action
 * (the thread's label) is then written, uncommitted. The test holds FOR NO KEY UPDATE, which lets
 * the inbound message reference the contact.
 */
const AFTER_THE_FIRST_ACTION: Hold = {
  lock: ({ contactId }) => `select id from contacts where id = '${contactId}' for no key update`,
  waitsIn: /\bfrom "contacts"[\s\S]*\bfor update$/i,
  commits: false,
};

/** An advisory lock key of this file's own. */
const COMMIT_LOCK = 220_022;

/**
 * The COMMIT itself held: a deferred constraint trigger on the workspace's runs (in this test's own
 * database) waits at commit time for an advisory lock the session holds. Everything of the run is
 * done and its COMMIT sent; the process dies before it hears the answer, and the commit completes.
 */
const IN_ITS_COMMIT: Hold = {
  async prepare(db, { workspaceId }) {
    await sql`create or replace function test_hold_commit() returns trigger language plpgsql as
      $$ begin perform pg_advisory_xact_lock_shared(${sql.lit(COMMIT_LOCK)}); return null; end $$`.execute(db);
    await sql`create constraint trigger test_hold_commit after insert on automation_runs deferrable initially deferred
      for each row when (new.workspace_id = ${sql.lit(workspaceId)}::uuid) execute function test_hold_commit()`.execute(db);
  },
  lock: () => `select pg_advisory_xact_lock(${COMMIT_LOCK})`,
  waitsIn: /^\s*commit/i,
  commits: true,
};

const REPLY = 'Recebemos sua mensagem, já vamos responder.';
const ACTIONS: Schemas['AutomationAction'][] = [
  { type: 'add_labels', target: 'thread', labels: ['vip'] },
  { type: 'set_attribute', key: 'origem', value: 'automacao' },
  { type: 'send_message', content: REPLY },
];

describe.skipIf(!databaseUrl)('an automation run killed with SIGKILL (needs DATABASE_URL)', () => {
  let own: OwnDatabase;
  let db: Db;
  const services: Service[] = [];
  const holders: pg.Client[] = [];
  beforeAll(async () => {
    own = await ownDatabase();
    db = createDatabase({ databaseUrl: own.url, pgliteDir: 'memory://', poolSize: 2 });
  });
  // A case that failed midway leaves nothing running to take the next case's jobs.
  afterEach(async () => {
    for (const service of services.splice(0)) await service.kill();
    for (const holder of holders.splice(0)) await holder.end().catch(() => {});
  });
  afterAll(async () => {
    await db?.destroy();
    await own?.drop();
  });

  // The run a job's (a customer's message runs its automations in its own transaction otherwise,
  // where a kill leaves nothing of either: test/automation-inline.test.ts).
  const env = (): Record<string, string> => ({
    AUTOMATIONS_INLINE: 'false',
    DATABASE_URL: own.url,
    SECRETS_KEY: testSecretsKey.toString('base64'),
    JOB_LEASE_MS: '2000',
    JOB_POLL_MS: '200',
  });

  async function startService(): Promise<Service> {
    const service = new Service(await freePort(), env());
    services.push(service);
    await service.waitForListening(1);
    return service;
  }

  const apiOf = (service: Service, key: Provisioned) => checkedClient(`http://127.0.0.1:${service.port}/v1`, key.apiKey);

  async function killRunningRun(hold: Hold): Promise<void> {
    const victim = await startService();
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Killed mid-run' });
    const api = apiOf(victim, key);
    const channelId = key.channels.find((c) => c.type === 'whatsapp')!.id;
    const from = buildPhone();
    // The customer's first message opens the thread before any automation exists (it queues no job).
    const first = await api.POST('/channels/{id}/sandbox/inbound', { params: { path: { id: channelId } }, body: { from, content: 'Oi' } });
    expect(first.response.status).toBe(201);
    const { threadId, contactId } = first.data!;
    const created = await api.POST('/automations', { body: { name: 'Boas-vindas', trigger: { event: 'message.received' }, actions: ACTIONS } });
    expect(created.response.status, JSON.stringify(created.error)).toBe(201);
    const automation = created.data!;

    const ids = { workspaceId: key.workspaceId, threadId, contactId };
    await hold.prepare?.(db, ids);
    const holder = new pg.Client({ connectionString: own.url });
    holders.push(holder);
    await holder.connect();
    await holder.query('begin');
    await holder.query(hold.lock(ids));
    const holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;

    const second = await api.POST('/channels/{id}/sandbox/inbound', {
      params: { path: { id: channelId } },
      body: { from, content: 'Preciso de ajuda com meu pedido' },
    });
    expect(second.response.status).toBe(201);
    expect(second.data!.threadId).toBe(threadId);

    // Inside the run: the job claimed by the victim, its session waiting for the row the test holds.
    const waiting = async () =>
      (
        await sql<{ pid: number; query: string }>`
          select pid, query from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and ${holderPid}::int = any(pg_blocking_pids(pid))`.execute(db)
      ).rows;
    await waitFor('the victim to wait for the held row inside its run', async () => (await waiting()).length > 0, 30_000);
    const [blocked, ...others] = await waiting();
    expect(others).toEqual([]);
    expect(blocked!.query).toMatch(hold.waitsIn);
    const job = await db.selectFrom('jobs').select(['locked_by']).where('workspace_id', '=', key.workspaceId).where('queue', '=', 'automation-event').execute();
    expect(job).toEqual([{ locked_by: expect.stringMatching(new RegExp(`^automation-event:${victim.child.pid}:`)) }]);

    process.kill(-victim.child.pid!, 'SIGKILL');
    await waitForExit(victim.child);
    // The dead process's session still waits; let it have the lock, and it ends: with no commit
    // inside the run, with its commit done when it had sent it.
    await holder.query('rollback');
    await waitFor(
      "the dead process's session to end",
      async () => (await sql`select 1 from pg_stat_activity where pid = ${blocked!.pid}::int`.execute(db)).rows.length === 0,
      30_000,
    );
    const runRows = () => db.selectFrom('automation_runs').select('id').where('workspace_id', '=', key.workspaceId).execute();
    expect(await runRows()).toHaveLength(hold.commits ? 1 : 0);
    const { labels } = await db.selectFrom('threads').select('labels').where('id', '=', threadId).executeTakeFirstOrThrow();
    expect(labels).toEqual(hold.commits ? ['vip'] : []);
    expect(await jobsLeft(db, key.workspaceId, 'automation-event')).toBe(hold.commits ? 0 : 1);
    // The automation's message, queued by the commit, waits for a process to send it.
    expect(await jobsLeft(db, key.workspaceId, 'message-delivery')).toBe(hold.commits ? 1 : 0);

    const next = await startService();
    await waitForNoJobs(db, key.workspaceId, 'automation-event', 30_000);
    // The automation's message sent by the next process (its delivery job and the sandbox's status updates ended).
    await waitForNoJobs(db, key.workspaceId, undefined, 30_000);

    const api2 = apiOf(next, key);
    const { data: events } = await api2.GET('/events', { params: { query: { limit: 100 } } });
    expect(events!.pagination.total).toBeLessThan(100);
    const triggering = events!.data.find((e) => e.type === 'message.created' && e.data.object.id === second.data!.id)!;
    const { data: runs } = await api2.GET('/automations/{id}/runs', { params: { path: { id: automation.id }, query: { limit: 100 } } });
    expect(runs!.data).toEqual([
      expect.objectContaining({
        eventId: triggering.id,
        threadId,
        status: 'succeeded',
        actions: ACTIONS.map((a) => ({ type: a.type, status: 'succeeded', reason: null })),
      }),
    ]);
    expect(await runRows()).toHaveLength(1);

    const { data: after } = await api2.GET('/threads/{id}', { params: { path: { id: threadId } } });
    expect(after!.labels).toEqual(['vip']);
    const { data: history } = await api2.GET('/threads/{id}/history', { params: { path: { id: threadId }, query: { limit: 100 } } });
    expect(history!.data.filter((h) => h.actor.type === 'automation').map((h) => [h.field, h.to, h.actor.id])).toEqual([['labels', ['vip'], automation.id]]);
    const { data: contact } = await api2.GET('/contacts/{id}', { params: { path: { id: contactId } } });
    expect(contact!.attributes).toEqual({ origem: 'automacao' });

    const { data: messages } = await api2.GET('/threads/{threadId}/messages', { params: { path: { threadId }, query: { limit: 100 } } });
    const outbound = messages!.data.filter((m) => m.direction === 'outbound');
    expect(outbound).toEqual([expect.objectContaining({ content: REPLY })]);
    expect(['sent', 'delivered', 'read']).toContain(outbound[0]!.status);

    // Each effect's event once, by the automation.
    const byAutomation = events!.data
      .filter((e) => e.data.actor?.type === 'automation')
      .map((e) => [e.type, e.data.actor?.id])
      .sort();
    expect(byAutomation).toEqual(
      [
        ['automation.run', automation.id],
        ['contact.updated', automation.id],
        ['message.created', automation.id],
        ['thread.updated', automation.id],
      ].sort(),
    );
  }

  it(
    'when the process is killed while its run waits for the thread, then the next process applies the actions once',
    () => killRunningRun(BEFORE_ANY_EFFECT),
    2 * START_MS + 120_000,
  );

  it(
    'when the process is killed after its run applied an action, then nothing of it commits and the next process applies every action once',
    () => killRunningRun(AFTER_THE_FIRST_ACTION),
    2 * START_MS + 120_000,
  );

  it(
    'when the process is killed with its COMMIT sent and not answered, then the commit stands and the next process only sends its message',
    () => killRunningRun(IN_ITS_COMMIT),
    2 * START_MS + 120_000,
  );
});
