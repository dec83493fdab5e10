// What held statuses cost in logs: a status naming no message is looked at again five times while
// it waits for its message (expected, logged at debug only) and logs one line when it is dropped.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace } from './helpers/api.js';
import { createMetaChannel, postWebhook } from './helpers/channels.js';
import { whatsappDelivery, whatsappStatus } from './helpers/graph.js';
import { LEVEL, LogCapture, waitFor } from './helpers/processes.js';
import { databaseUrl, ownDatabase, startServer, type OwnDatabase, type TestServer } from './helpers/server.js';

const STATUSES = 12;

let server: TestServer;
let own: OwnDatabase | undefined;
const logs = new LogCapture();
beforeAll(async () => {
  // Its workers take every job of their database: one of their own.
  own = databaseUrl ? await ownDatabase() : undefined;
  server = await startServer({ databaseUrl: own?.url, jobs: true, logs: logs.destination, logLevel: 'debug', config: { jobPollMs: 100 } });
});
afterAll(async () => {
  await server.close();
  await own?.drop();
});

describe('held statuses in the logs', () => {
  it('when statuses name messages the channel never sent, then each logs exactly one line, when it is dropped, and its looks before only at debug', async () => {
    const ws = await createWorkspace(server);
    const meta = await createMetaChannel(ws, 'whatsapp');
    const wamids = Array.from({ length: STATUSES }, (_, i) => `wamid.nobody${Date.now()}x${i}`);
    const held = () =>
      sql<{ id: string }>`select id from jobs where workspace_id = ${ws.workspaceId} and queue = 'early-status'`.execute(server.db).then((r) => r.rows);

    const res = await postWebhook(
      server,
      meta.channel.id,
      whatsappDelivery(meta.externalId, { statuses: wamids.map((id) => whatsappStatus(id, 'delivered', '5511987650001')) }),
      {
        appSecret: meta.appSecret,
      },
    );
    const jobIds = new Set((await held()).map((job) => job.id));
    // Every look at once rather than after the backoff's quarter of a minute: each put back is due again now.
    await waitFor(
      'every held status dropped',
      async () => {
        await sql`update jobs set run_at = now() where workspace_id = ${ws.workspaceId} and queue = 'early-status' and locked_by is null`.execute(server.db);
        return (await held()).length === 0;
      },
      20_000,
    );

    const about = logs.lines.filter((line) => jobIds.has(line.jobId as string) || wamids.includes(line.externalId as string));
    expect(res.status).toBe(200);
    expect(jobIds.size).toBe(STATUSES);
    expect(about.filter((line) => line.level >= LEVEL.info)).toEqual(
      wamids.map(() => expect.objectContaining({ level: LEVEL.info, msg: 'a status of a message this channel never sent was dropped' })),
    );
    expect(new Set(about.filter((line) => line.level >= LEVEL.info).map((line) => line.externalId))).toEqual(new Set(wamids));
    // The five looks happened: four put back, the last given up, each at debug.
    expect(
      about
        .filter((line) => line.level === LEVEL.debug)
        .map((line) => line.msg)
        .sort(),
    ).toEqual(wamids.flatMap(() => ['job failed on its last attempt; giving up', ...Array(4).fill('job failed; will retry')]).sort());
  });
});
