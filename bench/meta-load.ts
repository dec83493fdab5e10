// npm run bench:meta-load: Meta's webhook deliveries under a peak, against the service as shipped
// (production mode, its own fresh PostgreSQL database, Redis). A sender like Meta's: 1,200 distinct
// signed WhatsApp deliveries, 400 at once, each attempt given up (its connection closed) after 3 s,
// retried with exponential backoff and jitter, at most 4 attempts, all from one address. Prints and
// writes bench/results/runs/meta-load-<stamp>.md (bench/results/ with BENCH_KEEP=1, or BENCH_RESULTS_DIR): deliveries stored (distinct
// messages in the database), duplicates, 429 answers, other failures, and the time taken.
// BENCH_META_DELIVERIES, BENCH_META_CONCURRENCY, BENCH_META_TIMEOUT_MS, BENCH_META_ATTEMPTS and
// BENCH_META_BACKOFF_MS change the load.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { provision, SCOPES } from '../src/provisioning.js';
import { metaSignature, whatsappDelivery, whatsappText } from '../test/helpers/graph.js';
import { loadAverage } from './lib/cpu.js';
import { sleep, stopAll, stopProcess } from './lib/processes.js';
import { agent, benchDatabase, log, post, stamp, startBenchService, writeReport } from './lib/service-bench.js';

const setting = (name: string, fallback: number): number => Number(process.env[name] || fallback);
const DELIVERIES = setting('BENCH_META_DELIVERIES', 1_200);
const CONCURRENCY = setting('BENCH_META_CONCURRENCY', 400);
const TIMEOUT_MS = setting('BENCH_META_TIMEOUT_MS', 3_000);
const ATTEMPTS = setting('BENCH_META_ATTEMPTS', 4);
const BACKOFF_MS = setting('BENCH_META_BACKOFF_MS', 1_000);

/** What the sender saw: answers by status, attempts it gave up on (its timeout), connection errors. */
interface Tally {
  answers: Map<number, number>;
  timeouts: number;
  errors: number;
  attempts: number;
  /** Deliveries never answered 200 within ATTEMPTS. */
  undelivered: number;
}

/** One attempt: the status, 'timeout' when it was given up (its connection closed), or 'error'. */
function attempt(meta: http.Agent, url: string, body: string, signature: string): Promise<number | 'timeout' | 'error'> {
  return new Promise((resolve) => {
    const req = http.request(url, {
      method: 'POST',
      agent: meta,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-hub-signature-256': signature },
    });
    const timer = setTimeout(() => {
      resolve('timeout');
      req.destroy();
    }, TIMEOUT_MS);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => {
        clearTimeout(timer);
        resolve(res.statusCode ?? 0);
      });
    });
    req.on('error', () => {
      clearTimeout(timer);
      resolve('error');
    });
    req.end(body);
  });
}

/** Sends every delivery as Meta would: CONCURRENCY at once, each retried until 200 or ATTEMPTS. */
async function sendLikeMeta(url: string, appSecret: string, phoneNumberId: string): Promise<Tally> {
  const tally: Tally = { answers: new Map(), timeouts: 0, errors: 0, attempts: 0, undelivered: 0 };
  const meta = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let n = next++; n < DELIVERIES; n = next++) {
        const phone = `55119${String(n).padStart(8, '0')}`;
        const inbound = whatsappText(phone, `Oi, meu pedido ${n} ainda não chegou.`, `Cliente ${n}`, `wamid.metaload.${stamp}.${n}`);
        const body = JSON.stringify(whatsappDelivery(phoneNumberId, { messages: inbound.messages, contacts: inbound.contacts }));
        const signature = metaSignature(appSecret, body);
        let delivered = false;
        for (let tried = 0; tried < ATTEMPTS && !delivered; tried++) {
          if (tried > 0) await sleep(BACKOFF_MS * 2 ** (tried - 1) * (0.5 + Math.random()));
          tally.attempts++;
          const outcome = await attempt(meta, url, body, signature);
          if (outcome === 'timeout') tally.timeouts++;
          else if (outcome === 'error') tally.errors++;
          else tally.answers.set(outcome, (tally.answers.get(outcome) ?? 0) + 1);
          delivered = outcome === 200;
        }
        if (!delivered) tally.undelivered++;
      }
    }),
  );
  meta.destroy();
  return tally;
}

/** The channel's inbound messages: distinct message ids and rows. */
async function storedCounts(db: Db, channelId: string): Promise<{ distinct: number; rows: number }> {
  const { rows } = await sql<{ distinct: number; rows: number }>`
    select count(distinct external_id)::int as distinct, count(*)::int as rows
      from messages where channel_id = ${channelId}::uuid and direction = 'inbound'`.execute(db);
  return rows[0]!;
}

/** Waits until every delivery is stored, or the count stops moving for 5 s (requests whose sender left still finish). */
async function settledCounts(db: Db, channelId: string): Promise<{ distinct: number; rows: number }> {
  let last = await storedCounts(db, channelId);
  let stillSince = Date.now();
  while (last.distinct < DELIVERIES && Date.now() - stillSince < 5_000) {
    await sleep(250);
    const now = await storedCounts(db, channelId);
    if (now.rows !== last.rows) stillSince = Date.now();
    last = now;
  }
  return last;
}

async function main(): Promise<void> {
  const { databaseUrl, db, drop } = await benchDatabase('metaload', 2);
  let report: string;
  try {
    await migrateToLatest(db);
    const key = await provision(db, { plan: 'enterprise', scopes: [...SCOPES], workspaceName: 'Bench' });
    const service = await startBenchService('meta-load', { DATABASE_URL: databaseUrl, SECRETS_KEY: randomBytes(32).toString('base64') });
    const settings = { externalId: '106540352242922', accessToken: 'EAAbench', appSecret: randomBytes(16).toString('hex'), verifyToken: 'v' };
    const created = await post(`${service.base}/v1/channels`, JSON.stringify({ type: 'whatsapp', name: 'Bench', provider: 'meta', meta: settings }), {
      authorization: `Bearer ${key.apiKey}`,
    });
    const channelId = (JSON.parse(created.body) as { id: string }).id;

    const started = performance.now();
    const tally = await sendLikeMeta(`${service.base}/webhooks/meta/${channelId}`, settings.appSecret, settings.externalId);
    const sentS = (performance.now() - started) / 1000;
    const stored = await settledCounts(db, channelId);
    const storedS = (performance.now() - started) / 1000;
    await stopProcess(service.child);

    const answered = [...tally.answers].sort(([a], [b]) => a - b);
    const tooMany = tally.answers.get(429) ?? 0;
    const otherFailures = answered.filter(([status]) => status !== 200 && status !== 429).reduce((sum, [, n]) => sum + n, 0) + tally.errors;
    const rows = [
      ['deliveries stored (distinct messages in the database)', `${stored.distinct} of ${DELIVERIES}`, `${DELIVERIES}`],
      ['duplicates (rows beyond one per message id)', String(stored.rows - stored.distinct), '0'],
      ['answers of 429', String(tooMany), '0'],
      ['other failures (non-200 answers other than 429, connection errors)', String(otherFailures), ''],
      [`attempts given up at the sender's ${TIMEOUT_MS} ms timeout`, String(tally.timeouts), ''],
      [`deliveries not answered 200 within ${ATTEMPTS} attempts`, String(tally.undelivered), ''],
      ['attempts in all', String(tally.attempts), ''],
      ['answers by status', answered.map(([status, n]) => `${status}: ${n}`).join(', ') || '–', ''],
      ['time: sender done / every delivery stored', `${sentS.toFixed(1)} s / ${storedS.toFixed(1)} s`, ''],
    ];
    const met = stored.distinct === DELIVERIES && stored.rows === stored.distinct && tooMany === 0;
    const table = ['| measurement | result | target |', '|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
    const machine = `${DELIVERIES} deliveries, ${CONCURRENCY} at once, ${TIMEOUT_MS} ms timeout, ${ATTEMPTS} attempts, backoff from ${BACKOFF_MS} ms; ${os.cpus().length} cores, load average at the end ${loadAverage().toFixed(1)}`;
    log(`\n${table}\n\n${met ? 'met' : 'MISSED'}: every delivery stored once, none answered 429`);
    report = `# Meta webhooks under load, bench ${stamp}\n\n${machine}\n\n${table}\n\n${met ? 'Met' : 'Missed'}: every delivery stored once, none answered 429.\n`;
  } finally {
    await stopAll();
    await drop();
    agent.destroy();
  }
  writeReport('meta-load', report);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:meta-load failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
