// A service that exchanges files with Meta: the Graph double, its own database (PostgreSQL when
// DATABASE_URL is set), job workers polling fast, and a file media store in a temporary directory.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GraphDouble } from './graph.js';
import type { Config } from '../../src/config.js';
import { databaseUrl, ownDatabase, startServer, type TestServer } from './server.js';

export interface MediaService {
  graph: GraphDouble;
  server: TestServer;
  /** The file store's directory. */
  dir: string;
  close(): Promise<void>;
}

/** `config` overrides the service's (e.g. a short MEDIA_FETCH_TIMEOUT_MS). */
export async function startMediaService(name: string, config: Partial<Config> = {}): Promise<MediaService> {
  const graph = await GraphDouble.start();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `sf-${name}-`));
  const own = databaseUrl ? await ownDatabase() : undefined;
  const server = await startServer({
    databaseUrl: own?.url,
    jobs: true,
    config: {
      metaGraphUrl: graph.url,
      retryBaseMs: 20,
      retryMaxAttempts: 4,
      metaGraphTimeoutMs: 1_500,
      jobPollMs: 200,
      mediaStore: { kind: 'file', dir },
      ...config,
    },
  });
  return {
    graph,
    server,
    dir,
    async close() {
      await server.close();
      await graph.close();
      await own?.drop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
