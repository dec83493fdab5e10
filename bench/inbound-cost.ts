// npx tsx bench/inbound-cost.ts: what one signed Meta WhatsApp inbound (one text message) costs in
// round trips to PostgreSQL and in statements, for a known customer (an open thread already) and
// for a new one (a contact and a thread made), beside a POST /v1/messages. A TCP proxy between the
// app (in process, without job workers, on DATABASE_URL's server, a database of its own; Redis at
// REDIS_URL) and PostgreSQL counts each time the app writes after PostgreSQL answered (a round
// trip) and each statement it runs (an Execute or a simple Query of the frontend protocol); the
// statements of the last request of each kind are listed. BENCH_REQUESTS (200) sequential requests
// of each kind after 20 to warm up. Unlike a rate, the counts do not depend on what else the
// machine is doing.
import { randomBytes } from 'node:crypto';
import { createWorkspace, request } from '../test/helpers/api.js';
import { metaSignature, whatsappDelivery, whatsappText } from '../test/helpers/graph.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';
import { startCountingProxy } from './lib/pg-proxy.js';

const total = Number(process.env.BENCH_REQUESTS || 200);
const target = new URL(process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test');

let statements = 0;
/** The statements run since `listing` was set (their SQL, cut short), when it is. */
let listing: string[] | undefined;

/** Reads the frontend protocol of one connection: counts Execute and Query, names the SQL of each. */
function frontendReader(): (data: Buffer) => void {
  let pending = Buffer.alloc(0);
  let started = false;
  const named = new Map<string, string>();
  let unnamed = '';
  let bound = '';
  return (data) => {
    pending = Buffer.concat([pending, data]);
    for (;;) {
      if (!started) {
        // The startup message (and an SSLRequest before it) has no type byte.
        if (pending.length < 4) return;
        const length = pending.readInt32BE(0);
        if (pending.length < length) return;
        const code = pending.readInt32BE(4);
        pending = pending.subarray(length);
        if (code !== 80877103) started = true;
        continue;
      }
      if (pending.length < 5) return;
      const type = String.fromCharCode(pending[0]!);
      const length = pending.readInt32BE(1);
      if (pending.length < 1 + length) return;
      const body = pending.subarray(5, 1 + length);
      pending = pending.subarray(1 + length);
      if (type === 'P') {
        const end = body.indexOf(0);
        const name = body.subarray(0, end).toString();
        const text = body.subarray(end + 1, body.indexOf(0, end + 1)).toString();
        if (name) named.set(name, text);
        else unnamed = text;
      } else if (type === 'B') {
        const portalEnd = body.indexOf(0);
        const name = body.subarray(portalEnd + 1, body.indexOf(0, portalEnd + 1)).toString();
        bound = name ? (named.get(name) ?? `(prepared ${name})`) : unnamed;
      } else if (type === 'E' || type === 'Q') {
        statements++;
        const text = type === 'Q' ? body.subarray(0, body.indexOf(0)).toString() : bound;
        listing?.push(text.replace(/\s+/g, ' ').trim().slice(0, 160));
      }
    }
  };
}

const proxy = await startCountingProxy(target, frontendReader);
const own = await ownDatabase();
const server = await startServer({ databaseUrl: proxy.via(own.url) });
const lines: string[] = [];
const say = (line: string): void => {
  lines.push(line);
  process.stdout.write(`${line}\n`);
};
try {
  const ws = await createWorkspace(server);
  const meta = { externalId: '106540352242922', accessToken: 'EAAbench', appSecret: randomBytes(16).toString('hex'), verifyToken: 'v' };
  const created = await request(server, 'POST', '/v1/channels', { apiKey: ws.apiKey, body: { type: 'whatsapp', name: 'Bench', provider: 'meta', meta } });
  const channelId = (created.body as { id: string }).id;
  let n = 0;
  const known = `55119${String(Date.now() % 1e8).padStart(8, '0')}`;
  const inbound = (phone: string) => async () => {
    const message = whatsappText(phone, `Mensagem ${n++}`, 'Cliente');
    const body = JSON.stringify(whatsappDelivery(meta.externalId, { messages: message.messages, contacts: message.contacts }));
    const res = await request(server, 'POST', `/webhooks/meta/${channelId}`, {
      rawBody: body,
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': metaSignature(meta.appSecret, body) },
    });
    if (res.status !== 200) throw new Error(`the webhook answered ${res.status}`);
  };
  let fresh = 0;
  const newCustomer = () => inbound(`55219${String((Date.now() + fresh++) % 1e8).padStart(8, '0')}`)();
  let contactId: string | undefined = undefined;
  const reply = async () => {
    const res = await request(server, 'POST', '/v1/messages', { apiKey: ws.apiKey, body: { contactId, channelId, content: `Resposta ${n++}` } });
    if (res.status !== 201) throw new Error(`POST /v1/messages answered ${res.status}: ${JSON.stringify(res.body)}`);
  };
  await inbound(known)();
  const contacts = await request(server, 'GET', '/v1/contacts?limit=1', { apiKey: ws.apiKey });
  contactId = (contacts.body as { data: Array<{ id: string }> }).data[0]!.id;
  const kinds: Array<[string, () => Promise<void>]> = [
    ['signed inbound, a known customer (open thread)', inbound(known)],
    ['signed inbound, a new customer (contact and thread made)', newCustomer],
    ['POST /v1/messages (text, a contact who wrote)', reply],
  ];
  for (const [name, send] of kinds) {
    for (let i = 0; i < 20; i++) await send();
    const [turns0, statements0] = [proxy.turns(), statements];
    for (let i = 0; i < total - 1; i++) await send();
    listing = [];
    await send();
    const list = listing;
    listing = undefined;
    say(`${name}: ${((proxy.turns() - turns0) / total).toFixed(2)} round trips, ${((statements - statements0) / total).toFixed(2)} statements a request`);
    for (const [i, text] of list.entries()) say(`  ${i + 1}. ${text}`);
  }
} finally {
  await server.close();
  await own.drop();
  proxy.close();
}
