// MEDIA_STORE=s3://bucket[/prefix]: each file is an object `<prefix>/<key>`, through
// @aws-sdk/client-s3, with S3_ENDPOINT for S3-compatible servers (MinIO, Ceph, s3rver: path-style).
// Checksums only when an operation requires them: the SDK's default CRC32 trailers and aws-chunked
// uploads are not understood by every S3-compatible server. Spooling is on the local disk.
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import type { MediaStoreConfig } from '../config.js';
import type { ByteRange, MediaStore } from './store.js';

/** The SDK, loaded when a store first needs it: a third of a second of every start otherwise, and most services store media on disk. */
let sdk: Promise<typeof import('@aws-sdk/client-s3')> | undefined;
const loadSdk = (): Promise<typeof import('@aws-sdk/client-s3')> => (sdk ??= import('@aws-sdk/client-s3'));

export function s3Store(config: Extract<MediaStoreConfig, { kind: 's3' }>): MediaStore {
  let made: Promise<{ client: S3Client; sdk: typeof import('@aws-sdk/client-s3') }> | undefined;
  const s3 = (): Promise<{ client: S3Client; sdk: typeof import('@aws-sdk/client-s3') }> =>
    (made ??= loadSdk().then((sdk) => ({
      sdk,
      client: new sdk.S3Client({
        region: config.region,
        ...(config.endpoint && { endpoint: config.endpoint, forcePathStyle: true }),
        ...(config.accessKeyId && config.secretAccessKey && { credentials: { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey } }),
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      }),
    })));
  const objectKey = (key: string): string => (config.prefix ? `${config.prefix}/${key}` : key);
  return {
    spoolDir: path.join(os.tmpdir(), 'support-funnel-media'),
    async putFile(key, from, size, contentType) {
      try {
        const { client, sdk } = await s3();
        await client.send(
          new sdk.PutObjectCommand({ Bucket: config.bucket, Key: objectKey(key), Body: createReadStream(from), ContentLength: size, ContentType: contentType }),
        );
      } finally {
        await fs.rm(from, { force: true });
      }
    },
    async get(key, range?: ByteRange): Promise<Readable> {
      const { client, sdk } = await s3();
      const answer = await client.send(
        new sdk.GetObjectCommand({ Bucket: config.bucket, Key: objectKey(key), ...(range && { Range: `bytes=${range.start}-${range.end}` }) }),
      );
      return answer.Body as Readable;
    },
    async delete(key) {
      const { client, sdk } = await s3();
      await client.send(new sdk.DeleteObjectCommand({ Bucket: config.bucket, Key: objectKey(key) }));
    },
  };
}
