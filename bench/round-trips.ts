// npx tsx bench/round-trips.ts: the round trips to PostgreSQL of one POST /v1/contacts, with and
// without an Idempotency-Key. A TCP proxy between the app (in process, on DATABASE_URL's server, a
// database of its own) and PostgreSQL counts each time the app writes after PostgreSQL answered; 200
// sequential requests of each kind, after 20 to warm up. Unlike a rate, the count does not depend on
// what else the machine is doing.
import { randomUUID } from 'node:crypto';
import { buildContact, createWorkspace, request } from '../test/helpers/api.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';
import { startCountingProxy } from './lib/pg-proxy.js';

const proxy = await startCountingProxy();
const own = await ownDatabase();
const server = await startServer({ databaseUrl: proxy.via(own.url), redisUrl: false });
try {
  const ws = await createWorkspace(server);
  for (const keyed of [false, true]) {
    const post = async () => {
      const res = await request(server, 'POST', '/v1/contacts', {
        apiKey: ws.apiKey,
        body: buildContact(),
        ...(keyed && { headers: { 'idempotency-key': randomUUID() } }),
      });
      if (res.status !== 201) throw new Error(`POST /v1/contacts answered ${res.status}`);
    };
    for (let i = 0; i < 20; i++) await post();
    const before = proxy.turns();
    for (let i = 0; i < 200; i++) await post();
    process.stdout.write(
      `POST /v1/contacts ${keyed ? 'with an Idempotency-Key' : 'without a key'}: ${((proxy.turns() - before) / 200).toFixed(2)} round trips a request\n`,
    );
  }
} finally {
  await server.close();
  await own.drop();
  proxy.close();
}
