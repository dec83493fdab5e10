// npx tsx bench/round-trips.ts: the round trips to PostgreSQL of one POST /v1/contacts, with and
// without an Idempotency-Key. A TCP proxy between the app (in process, on DATABASE_URL's server, a
// database of its own) and PostgreSQL counts each time the app writes after PostgreSQL answered; 200
// sequential requests of each kind, after 20 to warm up. Unlike a rate, the count does not depend on
// what else the machine is doing.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { buildContact, createWorkspace, request } from '../test/helpers/api.js';
import { ownDatabase, startServer } from '../test/helpers/server.js';

const target = new URL(process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test');
let turns = 0;
const proxy = net.createServer((app) => {
  const postgres = net.connect(Number(target.port || 5432), target.hostname);
  let last: 'app' | 'postgres' | undefined;
  app.on('data', (data) => {
    if (last !== 'app') turns++;
    last = 'app';
    postgres.write(data);
  });
  postgres.on('data', (data) => {
    last = 'postgres';
    app.write(data);
  });
  app.on('close', () => postgres.destroy());
  postgres.on('close', () => app.destroy());
  app.on('error', () => {});
  postgres.on('error', () => {});
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const own = await ownDatabase();
const url = new URL(own.url);
url.hostname = '127.0.0.1';
url.port = String((proxy.address() as net.AddressInfo).port);
const server = await startServer({ databaseUrl: url.toString(), redisUrl: false });
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
    const before = turns;
    for (let i = 0; i < 200; i++) await post();
    process.stdout.write(
      `POST /v1/contacts ${keyed ? 'with an Idempotency-Key' : 'without a key'}: ${((turns - before) / 200).toFixed(2)} round trips a request\n`,
    );
  }
} finally {
  await server.close();
  await own.drop();
  proxy.close();
}
