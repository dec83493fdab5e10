// The s3:// media store against a local S3-compatible server (s3rver, started here): uploads become
// objects under the configured prefix, downloads and ranges stream back from the bucket, and a
// refused upload leaves no object.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, request } from './helpers/api.js';
import { startLocalS3, type LocalS3 } from './helpers/s3.js';
import { startServer, type TestServer } from './helpers/server.js';
import { loadConfig } from '../src/config.js';

let s3: LocalS3;
let server: TestServer;

beforeAll(async () => {
  s3 = await startLocalS3('support-media');
  const { mediaStore } = loadConfig({
    MEDIA_STORE: 's3://support-media/tenants',
    S3_ENDPOINT: s3.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
  });
  server = await startServer({ config: { mediaStore } });
});
afterAll(async () => {
  await server?.close();
  await s3?.close();
});

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

describe('media on an S3 bucket', () => {
  it('when a document is uploaded, then it is an object under the prefix, served whole and by range', async () => {
    const ws = await createWorkspace(server);
    const bytes = randomBytes(3 * 2 ** 20 + 17);

    const created = await request(server, 'POST', '/v1/media?filename=contrato.pdf', {
      apiKey: ws.apiKey,
      headers: { 'content-type': 'application/pdf' },
      rawBody: bytes,
    });

    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ type: 'document', size: bytes.length, sha256: sha256(bytes), status: 'stored' });
    expect(await s3.keys()).toContain(`tenants/${ws.workspaceId}/${created.body.id}`);
    const whole = await fetch(`${server.baseUrl}/v1/media/${created.body.id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(whole.status).toBe(200);
    expect(whole.headers.get('content-length')).toBe(String(bytes.length));
    expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);
    const part = await fetch(`${server.baseUrl}/v1/media/${created.body.id}`, {
      headers: { authorization: `Bearer ${ws.apiKey}`, range: 'bytes=1048576-1048675' },
    });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(1_048_576, 1_048_676))).toBe(true);
  });

  it('when an upload is refused (over the limit), then no object is written', async () => {
    const ws = await createWorkspace(server);
    const before = await s3.keys();

    const refused = await request(server, 'POST', '/v1/media', {
      apiKey: ws.apiKey,
      headers: { 'content-type': 'image/webp' },
      rawBody: randomBytes(600 * 1024),
    });

    expect(refused.status).toBe(413);
    expect(await s3.keys()).toEqual(before);
  });
});
