// npx tsx bench/run-writes.ts: what PostgreSQL spends on a matching label run's writes (the thread's
// new labels, its history row, thread.updated and automation.run, the run's record), one run per
// transaction as the service writes them today against twenty runs per transaction, each with its
// own statements (a batch of messages' runs in one transaction) or in one multi-row statement per
// table (a batch written together). pgbench (one connection,
// prepared statements, synchronous_commit off: an inline run shares its message's commit, so its
// WAL flush is not the run's) replays copies of the rows a real run wrote, in a database of its own
// on DATABASE_URL's server: 25 sandbox inbounds from new contacts, each run by a label automation.
// BENCH_DURATION_S (default 6) a script per round, BENCH_ROUNDS (default 3) rounds, the scripts
// alternated. Prints µs a run per script and round.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createWorkspace, request } from '../test/helpers/api.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';

const seconds = Number(process.env.BENCH_DURATION_S ?? 6);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const BATCH = 20;
const own = await ownDatabase();
try {
  const server = await startServer({ databaseUrl: own.url, redisUrl: false, jobs: false });
  try {
    const ws = await createWorkspace(server);
    const k = { apiKey: ws.apiKey };
    await request(server, 'POST', '/v1/automations', {
      ...k,
      body: {
        name: 'm',
        trigger: { event: 'message.received' },
        conditions: { any: [{ field: 'message.content', operator: 'contains', value: 'pedido' }] },
        actions: [{ type: 'add_labels', target: 'thread', labels: ['pedido'] }],
      },
    });
    const channels = (await request(server, 'GET', '/v1/channels', k)).body as { data: Array<{ id: string; type: string }> };
    const ch = channels.data.find((c) => c.type === 'whatsapp')!.id;
    for (let i = 0; i < 25; i++) {
      const res = await request(server, 'POST', `/v1/channels/${ch}/sandbox/inbound`, {
        ...k,
        body: { from: `+5511987${String(i).padStart(6, '0')}`, content: 'meu pedido' },
      });
      if (res.status >= 300) throw new Error(`sandbox inbound: ${res.status}`);
    }
  } finally {
    await server.close();
  }
  const direct = new pg.Client({ connectionString: own.url });
  await direct.connect();
  // Templates: one real run's rows, copied with new ids by the scripts.
  await direct.query(`
    create table tpl_ev as select * from events where type in ('thread.updated', 'automation.run') order by created_at limit 2;
    create table tpl_run as select * from automation_runs limit 1;
    create table tpl_hist as select * from thread_history where field = 'labels' limit 1;
    create table tpl_thr as select workspace_id, id, row_number() over (order by created_at) as n from threads`);
  await direct.query('vacuum analyze');
  await direct.end();

  const copies = (n: string) => ({
    hist: `insert into thread_history select workspace_id, gen_random_uuid(), thread_id, field, from_status, to_status, from_id, to_id, stay_ms, actor_type, actor_id, reason, now(), from_labels, to_labels from tpl_hist${n}`,
    events: `insert into events select workspace_id, gen_random_uuid(), type, data, contact_id, now(), actor_type, actor_id, pg_current_xact_id(), source, merged_ids, metric from tpl_ev${n}`,
    runs: `insert into automation_runs select workspace_id, gen_random_uuid(), automation_id, gen_random_uuid()::text, event_id, thread_id, status, reason, actions, now(), root_key from tpl_run${n}`,
  });
  const one = copies('');
  const many = copies(`, generate_series(1, ${BATCH})`);
  // The label flips among seven values, so that each update changes the indexed label_keys (not HOT), as a new label does.
  const label = (n: string) => `label_keys = array['vip' || ((:k + ${n}) % 7)], labels = array['vip'], updated_at = now() from tpl_thr x`;
  const scripts: Record<string, { sql: string; runs: number }> = {
    'empty transaction (begin; select 1; commit)': { sql: 'begin;\nselect 1;\ncommit;', runs: 1 },
    'one run a transaction, four statements (as today)': {
      sql: `\\set n random(1, 25)\n\\set k random(1, 1000000)\nbegin;\nupdate threads t set ${label('0')} where x.n = :n and t.workspace_id = x.workspace_id and t.id = x.id;\n${one.hist};\n${one.events};\n${one.runs};\ncommit;`,
      runs: 1,
    },
    [`${BATCH} runs a transaction, four statements each`]: {
      sql: `\\set k random(1, 1000000)\nbegin;\n${Array.from(
        { length: BATCH },
        (_, i) =>
          `update threads t set ${label(String(i))} where x.n = ${i + 1} and t.workspace_id = x.workspace_id and t.id = x.id;\n${one.hist};\n${one.events};\n${one.runs};`,
      ).join('\n')}\ncommit;`,
      runs: BATCH,
    },
    [`${BATCH} runs a transaction, one multi-row statement a table`]: {
      sql: `\\set k random(1, 1000000)\nbegin;\nupdate threads t set ${label('x.n')} where x.n <= ${BATCH} and t.workspace_id = x.workspace_id and t.id = x.id;\n${many.hist};\n${many.events};\n${many.runs};\ncommit;`,
      runs: BATCH,
    },
  };
  const dir = mkdtempSync(join(tmpdir(), 'run-writes-'));
  const results = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, { sql, runs }] of Object.entries(scripts)) {
      const file = join(dir, `${results.size}.sql`);
      writeFileSync(file, `${sql}\n`);
      const url = new URL(own.url);
      const out = execFileSync(
        'pgbench',
        [
          '-h',
          url.hostname,
          '-p',
          url.port || '5432',
          '-U',
          decodeURIComponent(url.username),
          '-n',
          '-M',
          'prepared',
          '-c',
          '1',
          '-T',
          String(seconds),
          '-f',
          file,
          url.pathname.slice(1),
        ],
        { encoding: 'utf8', env: { ...process.env, PGOPTIONS: '-c synchronous_commit=off' } },
      );
      const ms = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);
      if (!Number.isFinite(ms)) throw new Error(`pgbench printed no latency:\n${out}`);
      results.set(name, [...(results.get(name) ?? []), (ms * 1000) / runs]);
    }
  }
  console.log(`µs of PostgreSQL a run (pgbench, one connection, ${seconds} s a script, ${rounds} rounds alternated):`);
  for (const [name, us] of results) console.log(`  ${name}: ${us.map((u) => u.toFixed(0)).join(', ')}`);
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await own.drop();
}
