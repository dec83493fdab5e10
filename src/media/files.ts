// Uploads stored and files served: an upload's spooled bytes moved into the store with its row, and
// a stored file streamed back with its ETag (its SHA-256), If-None-Match (304) and one Range (206).
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.js';
import { findMedia, insertStoredMedia, mediaRowToAttachment } from '../db/media.js';
import type { Attachment, MediaRow } from '../db/schema.js';
import { ApiError, notFound } from '../errors.js';
import { cleanFilename } from '../text.js';
import { mediaKey, type ByteRange, type MediaStore } from './store.js';
import { mediaTypeOf } from './types.js';
import type { Upload } from './upload.js';

/**
 * Stores a spooled upload: its bytes, then its row (its name cleaned as a received file's is); the
 * bytes go again if the row cannot be written.
 */
export async function storeUpload(db: Db, store: MediaStore, workspaceId: string, upload: Upload, filename: string | null): Promise<Attachment> {
  const id = uuidv7();
  const key = mediaKey(workspaceId, id);
  await store.putFile(key, upload.path, upload.size, upload.mimeType);
  try {
    const row = await insertStoredMedia(
      db,
      workspaceId,
      {
        id,
        type: upload.type,
        mimeType: upload.mimeType,
        size: upload.size,
        sha256: upload.sha256,
        filename: filename === null ? null : cleanFilename(filename),
        storageKey: key,
      },
      new Date(),
    );
    return mediaRowToAttachment(row);
  } catch (err) {
    await store.delete(key).catch(() => undefined);
    throw err;
  }
}

/** A stored file of the workspace; 404 for another's, a pending or failed one, or an erased person's. */
export async function storedFile(db: Db, workspaceId: string, id: string): Promise<MediaRow & { storage_key: string; sha256: string }> {
  const row = await findMedia(db, workspaceId, id);
  if (!row || row.status !== 'stored' || !row.storage_key || !row.sha256) throw notFound('Media');
  return row as MediaRow & { storage_key: string; sha256: string };
}

/**
 * The one range of a `Range` header over `size` bytes; undefined to serve it all (no header, another
 * unit, several ranges, a malformed one: RFC 9110 lets a server ignore those); 'unsatisfiable' when
 * it lies outside the file.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const [first, last] = [match[1]!, match[2]!];
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/** Whether If-None-Match names this ETag (or is `*`); weak forms match too (RFC 9110 weak comparison). */
function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

/** Writes a stored file (or its range) to the response. */
export async function serveFile(store: MediaStore, row: MediaRow & { storage_key: string; sha256: string }, req: Request, res: Response): Promise<void> {
  const size = Number(row.size);
  const etag = `"${row.sha256}"`;
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', 'private, no-cache');
  if (noneMatch(req.get('if-none-match'), etag)) {
    res.status(304).end();
    return;
  }
  // If-Range (RFC 9110 §13.1.5): the range is for the file the client holds; another (its ETag
  // differs, or a date, as no Last-Modified is sent) gets the whole file, 200.
  const ifRange = req.get('if-range');
  const range = ifRange === undefined || ifRange === etag ? parseRange(req.get('range'), size) : undefined;
  if (range === 'unsatisfiable') {
    throw new ApiError(416, 'range_not_satisfiable', `The range lies outside the file's ${size} bytes.`, undefined, { 'Content-Range': `bytes */${size}` });
  }
  const body = req.method === 'HEAD' ? undefined : await store.get(row.storage_key, range);
  res.status(range ? 206 : 200);
  res.setHeader('Content-Type', mediaTypeOf(row.mime_type) ? row.mime_type : 'application/octet-stream');
  res.setHeader('Content-Length', String(range ? range.end - range.start + 1 : size));
  res.setHeader('Accept-Ranges', 'bytes');
  if (range) res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
  const name = row.filename ?? `${row.id}`;
  res.setHeader('Content-Disposition', `attachment; filename="${name.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(name)}`);
  if (!body) {
    res.end();
    return;
  }
  // A store that fails midway leaves a response cut short (its Content-Length says so to the client):
  // a warning. A client that goes away first is no fault of ours, even one that read every byte and
  // closed before the store's stream said it had ended (the end comes one read later): debug.
  // Which came first tells them apart: when the client goes, pipeline then destroys the store's
  // stream with an error of its own (Node 22 and later), after the response's close.
  let clientLeft = false;
  res.once('close', () => (clientLeft ||= !res.writableFinished));
  let storeFailed = false;
  body.once('error', () => (storeFailed ||= !clientLeft));
  await pipeline(body, res).catch((err: unknown) =>
    storeFailed
      ? req.log.warn({ err, mediaId: row.id }, 'media download cut short')
      : req.log.debug({ err, mediaId: row.id }, 'the client left a media download'),
  );
}
