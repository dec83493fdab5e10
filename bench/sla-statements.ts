// npx tsx bench/sla-statements.ts: the statements of the write paths the SLA hooks follow, per
// request (averaged over BENCH_REQUESTS, 20), in a workspace without an SLA policy and in one with
// 3 enabled policies (the first matching a label no thread has, the second every thread, the
// third never reached), and in one with 2 enabled policies without conditions (as bench:sla-rates'
// are: the first holds every thread, chosen without reading the thread): a sandbox inbound of a
// new customer (the thread opened and its inbound message), a key's answer (POST /v1/messages:
// stops the first-response clock), a stage change
// and a label change (the same policy chosen again), closing, and a known customer's inbound
// after the closing (reopens nothing: a new thread). Counted by wrapping pg's Client#query in an
// in-process server without job workers on a database of its own (DATABASE_URL's server). Beside
// them, the rows of `jobs` each request inserts, updates and deletes, per queue (an SLA timer's cost
// in PostgreSQL), and of `threads` (each a new version of a thread's row and its index entries),
// counted exactly by triggers the bench adds to its own database (pg_stat_user_tables
// gets a backend's counts only when it flushes them, a second or more later). Unlike a rate, the
// counts do not depend on what else the machine is doing.
import pg from 'pg';
import { createWorkspace, request } from '../test/helpers/api.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';

let log: string[] | undefined;
const orig = Reflect.get(pg.Client.prototype, 'query') as (this: unknown, ...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: unknown, ...args: unknown[]) {
  const a = args[0] as string | { text: string };
  const text = typeof a === 'string' ? a : a?.text;
  if (log && text) log.push(text.replace(/\s+/g, ' ').trim().slice(0, 120));
  return orig.apply(this, args);
};
const total = Number(process.env.BENCH_REQUESTS || 20);
const own = await ownDatabase();
const server = await startServer({ databaseUrl: own.url, redisUrl: false, jobs: false });
const counter = new pg.Client({ connectionString: own.url });
await counter.connect();
await counter.query(`
  create table bench_job_writes (queue text not null, op text not null);
  create function bench_count_job_write() returns trigger language plpgsql as $$
    begin insert into bench_job_writes values (coalesce(new.queue, old.queue), lower(tg_op)); return null; end $$;
  create trigger bench_job_writes after insert or update or delete on jobs for each row execute function bench_count_job_write();
  create function bench_count_thread_write() returns trigger language plpgsql as $$
    begin insert into bench_job_writes values ('threads', lower(tg_op)); return null; end $$;
  create trigger bench_thread_writes after insert or update or delete on threads for each row execute function bench_count_thread_write()`);
/** The rows of `jobs` (as `<queue> <op>`) and of `threads` (`threads <op>`: each a version of a thread's row) written since the last call -> count. */
async function jobWrites(): Promise<Map<string, number>> {
  const { rows } = await counter.query<{ what: string; n: number }>(
    `with gone as (delete from bench_job_writes returning *) select queue || ' ' || op as what, count(*)::int as n from gone group by 1`,
  );
  return new Map(rows.map((row) => [row.what, row.n]));
}
type Kind = 'inbound, new customer' | 'POST /v1/messages (answer)' | 'stage change' | 'label change' | 'close';
try {
  const workspaces = [
    { name: '0 enabled SLA policies', policies: [] },
    {
      name: '3 enabled SLA policies, the first with a condition',
      policies: [
        ['vip', { all: [{ field: 'thread.labels', operator: 'contains', value: 'vip' }] }],
        ['all', {}],
        ['never', {}],
      ],
    },
    {
      name: '2 enabled SLA policies without conditions',
      policies: [
        ['all', {}],
        ['never', {}],
      ],
    },
  ] as const;
  for (const [w, { name: workspaceName, policies }] of workspaces.entries()) {
    const ws = await createWorkspace(server);
    const k = { apiKey: ws.apiKey };
    const targets = { firstResponseMinutes: 15, resolutionMinutes: 600 };
    for (const [name, conditions] of policies) {
      const res = await request(server, 'POST', '/v1/sla-policies', { ...k, body: { name, conditions, targets, warnBeforeMinutes: 5 } });
      if (res.status !== 201) throw new Error(`policy ${res.status} ${JSON.stringify(res.body)}`);
    }
    const stages = (await request(server, 'GET', '/v1/stages', k)).body as { data: Array<{ id: string; name: string }> };
    const channels = (await request(server, 'GET', '/v1/channels', k)).body as { data: Array<{ id: string; type: string }> };
    const ch = channels.data.find((c) => c.type === 'whatsapp')!.id;
    const counts = new Map<Kind, number>();
    const samples = new Map<Kind, string[]>();
    const writes = new Map<Kind, Map<string, number>>();
    const measure = async (kind: Kind, run: () => Promise<{ status: number; body: unknown }>, last: boolean) => {
      await jobWrites();
      log = [];
      const res = await run();
      const seen = log;
      log = undefined;
      if (res.status >= 300) throw new Error(`${kind}: ${res.status} ${JSON.stringify(res.body)}`);
      counts.set(kind, (counts.get(kind) ?? 0) + seen.length);
      const written = writes.get(kind) ?? new Map<string, number>();
      for (const [what, n] of await jobWrites()) written.set(what, (written.get(what) ?? 0) + n);
      writes.set(kind, written);
      if (last) samples.set(kind, seen);
      return res;
    };
    for (let i = -3; i < total; i++) {
      const last = i === total - 1;
      const from = `+55119${w}${String(i + 10).padStart(7, '0')}`;
      const m = (kind: Kind, run: () => Promise<{ status: number; body: unknown }>) => (i < 0 ? run() : measure(kind, run, last));
      await m('inbound, new customer', () => request(server, 'POST', `/v1/channels/${ch}/sandbox/inbound`, { ...k, body: { from, content: 'oi' } }));
      const threads = (await request(server, 'GET', `/v1/threads?status=open&limit=100`, k)).body as {
        data: Array<{ id: string; contactId: string; labels: string[] }>;
      };
      const contacts = (await request(server, 'GET', `/v1/contacts?limit=100`, k)).body as { data: Array<{ id: string; phone: string | null }> };
      const contact = contacts.data.find((c) => c.phone === from)!;
      const thread = threads.data.find((t) => t.contactId === contact.id)!;
      await m('POST /v1/messages (answer)', () =>
        request(server, 'POST', '/v1/messages', { ...k, body: { contactId: contact.id, channelId: ch, content: 'olá' } }),
      );
      await m('stage change', () => request(server, 'PATCH', `/v1/threads/${thread.id}`, { ...k, body: { stageId: stages.data[1]!.id } }));
      await m('label change', () => request(server, 'PATCH', `/v1/threads/${thread.id}`, { ...k, body: { labels: ['pedido'] } }));
      await m('close', () => request(server, 'PATCH', `/v1/threads/${thread.id}`, { ...k, body: { status: 'closed' } }));
    }
    console.log(`\n== ${workspaceName}`);
    for (const [kind, n] of counts) {
      const rows = [...(writes.get(kind) ?? [])].sort().map(([what, w]) => `${what} ${(w / total).toFixed(2)}`);
      console.log(`${kind}: ${(n / total).toFixed(2)} statements; rows of jobs and threads: ${rows.join(', ') || 'none'}`);
    }
    if (process.env.BENCH_LIST) for (const [kind, seen] of samples) console.log(`-- ${kind}\n  ${seen.join('\n  ')}`);
  }
} finally {
  await counter.end();
  await server.close();
  await own.drop();
}
