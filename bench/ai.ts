// npm run bench:ai (also the end of npm run bench): AI agents' latency, against the service as
// shipped (production mode, its own fresh PostgreSQL database, Redis) and an OpenAI-compatible double
// in this process that answers at once. Customers write on a sandbox channel whose default agent is
// active, at a fixed rate, each on a thread of their own; measured: from the inbound POST to the AI
// request arriving at the double (the inbound's commit lies between the two), p50/p95, and the
// answers sent back as the agent's messages. Target: p50 <= 100 ms. Honours BENCH_SCALE (the rate:
// 50/s at 1, at least 5/s), BENCH_DURATION_S and BENCH_RESULTS_DIR. Stops by itself.
import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { AiDouble, textAnswer } from '../test/helpers/ai.js';
import { loadAverage } from './lib/cpu.js';
import { freePort, httpStatus, sleep, startProcess, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, durationS, log, ms, pct, post, redisUrl, ROOT, scale, stamp, writeReport } from './lib/service-bench.js';

/** What the bench reads of a recorded Chat Completions request. */
type ChatBody = { messages?: Array<{ content?: string }> };
const lastContent = (body: unknown): string => (body as ChatBody | undefined)?.messages?.at(-1)?.content ?? '';

const rate = Math.max(5, Math.round(50 * scale));

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('ai', 2);
  const ai = await AiDouble.start();
  ai.answer(textAnswer('Olá! Já vou verificar.'));
  const rows: string[][] = [];
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench AI' });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      ...process.env,
      NODE_ENV: 'production',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `sf-bench-ai:${stamp}:`,
      AI_BASE_URL: ai.url,
      AI_API_KEY: 'sk-bench',
    };
    const service = startProcess(process.execPath, ['--import', 'tsx', 'src/server.ts'], env, ROOT, true);
    const deadline = Date.now() + 120_000;
    while ((await httpStatus(`${base}/healthz`)) !== 200) {
      if (Date.now() > deadline) throw new Error(`the service did not start:\n${service.output()}`);
      await sleep(200);
    }
    const auth = { authorization: `Bearer ${key.apiKey}` };
    const created = await post(`${base}/v1/agents`, JSON.stringify({ name: 'Ana', instructions: 'Responda com cordialidade.', model: 'bench-model' }), auth);
    const agentId = (JSON.parse(created.body) as { id: string }).id;
    const channelId = key.channels.find((c) => c.type === 'whatsapp')!.id;
    await post(`${base}/v1/channels/${channelId}`, JSON.stringify({ defaultAgentId: agentId }), auth, 'PATCH');

    // Warm-up: a few customers, not measured.
    for (let i = 0; i < 5; i++)
      await post(
        `${base}/v1/channels/${channelId}/sandbox/inbound`,
        JSON.stringify({ from: `+5511900${String(i).padStart(6, '0')}`, content: `warm-up ${i}` }),
        auth,
      );
    await sleep(500);

    const total = Math.round(rate * durationS);
    const sentAt = new Map<string, number>();
    const answeredAt = new Map<string, number>();
    let errors = 0;
    const start = performance.now() + 100;
    const pending: Array<Promise<void>> = [];
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const marker = `bench-${i}`;
      sentAt.set(marker, Date.now());
      pending.push(
        post(`${base}/v1/channels/${channelId}/sandbox/inbound`, JSON.stringify({ from: `+5511910${String(i).padStart(6, '0')}`, content: marker }), auth).then(
          (answer) => {
            if (answer.status === 201) answeredAt.set(marker, Date.now());
            else errors++;
          },
        ),
      );
    }
    await Promise.all(pending);
    const callsDeadline = Date.now() + 30_000;
    const arrived = () => ai.requests.filter((r) => lastContent(r.body).startsWith('bench-'));
    while (arrived().length < total - errors && Date.now() < callsDeadline) await sleep(100);
    const fromPost: number[] = [];
    const from201: number[] = [];
    for (const request of arrived()) {
      const marker = lastContent(request.body);
      if (sentAt.has(marker)) fromPost.push(request.at - sentAt.get(marker)!);
      if (answeredAt.has(marker)) from201.push(request.at - answeredAt.get(marker)!);
    }
    const replies = await waitForReplies(db, key.workspaceId, total - errors);
    log(`AI at ${rate} inbound/s for ${durationS} s: ${total} sent, ${errors} errors, ${fromPost.length} AI calls, ${replies} answers sent`);
    log(
      `inbound POST -> AI request p50 ${ms(pct(fromPost, 50))}, p95 ${ms(pct(fromPost, 95))}; 201 -> AI request p50 ${ms(pct(from201, 50))}, p95 ${ms(pct(from201, 95))}`,
    );
    const met = pct(fromPost, 50) <= 100 && fromPost.length === total - errors && errors === 0;
    rows.push([
      `inbound at a fixed ${rate}/s on ${total} threads: POST -> AI request, p50 / p95`,
      `${ms(pct(fromPost, 50))} / ${ms(pct(fromPost, 95))}`,
      'p50 <= 100 ms',
      met ? 'met' : 'missed',
    ]);
    rows.push(['the same, from the 201 (after the commit) -> AI request, p50 / p95', `${ms(pct(from201, 50))} / ${ms(pct(from201, 95))}`, '', '']);
    rows.push([
      'AI calls / answers sent as the agent / inbound errors',
      `${fromPost.length} / ${replies} / ${errors}`,
      `${total} / ${total} / 0`,
      fromPost.length === total && replies === total ? 'met' : 'missed',
    ]);
    const warnings = service
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50'));
    if (warnings.length > 0) log(`service warnings (last ${warnings.length}):\n${warnings.slice(-10).join('\n')}`);
    await stopProcess(service.child);
  } finally {
    await ai.close();
    await stopAll();
    await drop();
    agent.destroy();
  }
  const table = ['| measurement | result | target | |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  log(`\n${table}`);
  const machine = `BENCH_SCALE=${scale} (${rate}/s), BENCH_DURATION_S=${durationS}, ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
  writeReport('ai', `# AI agents bench ${stamp}\n\n${machine}\n\n${table}\n`);
}

/** Waits (up to 30 s) until `expected` answers of the agent were sent; how many were. */
async function waitForReplies(db: Db, workspaceId: string, expected: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from messages
       where workspace_id = ${workspaceId} and direction = 'outbound' and agent_id is not null and status <> 'queued'
         and thread_id in (select thread_id from messages where workspace_id = ${workspaceId} and content like 'bench-%')`.execute(db);
    if (rows[0]!.n >= expected || Date.now() > deadline) return rows[0]!.n;
    await sleep(100);
  }
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:ai failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
