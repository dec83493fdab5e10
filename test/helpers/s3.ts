// A local S3-compatible server for the s3:// media store's tests: s3rver (in process, on a free
// port, its buckets in a temp directory), with the one bucket the test names.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
// @ts-expect-error -- s3rver ships no types; the few calls below are its documented API.
import S3rver from 's3rver';
import { freePort } from './processes.js';

export interface LocalS3 {
  endpoint: string;
  bucket: string;
  /** The stored objects' keys (s3rver keeps each object as files under the bucket's directory). */
  keys(): Promise<string[]>;
  close(): Promise<void>;
}

interface S3rverInstance {
  run(): Promise<unknown>;
  close(): Promise<void>;
}

export async function startLocalS3(bucket: string): Promise<LocalS3> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'sf-s3rver-'));
  const port = await freePort();
  const server = new (S3rver as new (options: Record<string, unknown>) => S3rverInstance)({
    port,
    address: '127.0.0.1',
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    async keys() {
      const root = path.join(directory, bucket);
      const entries = await fs.readdir(root, { recursive: true, withFileTypes: true });
      // Each object is <key>._S3rver_object (with ._S3rver_metadata.json beside it).
      return entries
        .filter((e) => e.isFile() && e.name.endsWith('._S3rver_object'))
        .map((e) => path.relative(root, path.join(e.parentPath, e.name.slice(0, -'._S3rver_object'.length))))
        .sort();
    },
    async close() {
      await server.close();
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}
