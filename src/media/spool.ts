// A file received as a stream (an upload's body, a download from Meta) written to the spool
// directory while its size is counted and its SHA-256 computed: never held in memory whole. It
// stops at the size limit; a stream that fails or ends early leaves no file behind. A process
// killed mid-file (SIGKILL, OOM) does leave its part: the sweep at start-up, and every hour after,
// removes it.
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from '../logger.js';

/**
 * How long a spool file goes unwritten before it is taken for a dead process's. A live one is written
 * as its bytes arrive (an upload within REQUEST_TIMEOUT_MS, at most 10 minutes; a download with no
 * pause over META_GRAPH_TIMEOUT_MS, at most 2 minutes, and ended by MEDIA_FETCH_TIMEOUT_MS), then
 * stored at once (a rename, or an S3 PUT:
 * a 100 MB file outlasts this only below 28 KB/s).
 */
export const ABANDONED_SPOOL_MS = 60 * 60 * 1000;

/**
 * Removes the `.part` files in `dir` last written more than `olderThanMs` ago: what killed processes
 * left. Newer ones may be another live process's (a cluster's workers, instances on one host share
 * the directory) and stay. Returns how many went.
 */
export async function sweepSpool(dir: string, olderThanMs = ABANDONED_SPOOL_MS): Promise<number> {
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const before = Date.now() - olderThanMs;
  let removed = 0;
  for (const name of names) {
    if (!name.endsWith('.part')) continue;
    const file = path.join(dir, name);
    const stat = await fs.stat(file).catch(() => undefined);
    if (!stat?.isFile() || stat.mtimeMs >= before) continue;
    await fs.rm(file, { force: true });
    removed++;
  }
  return removed;
}

/**
 * Sweeps `dir` again every `everyMs` (by default ABANDONED_SPOOL_MS), so what a process killed after
 * this one started left goes too, without waiting for the next start. Returns its stop.
 */
export function sweepSpoolEvery(
  dir: string,
  logger: Logger,
  { everyMs = ABANDONED_SPOOL_MS, olderThanMs = ABANDONED_SPOOL_MS }: { everyMs?: number; olderThanMs?: number } = {},
): () => Promise<void> {
  let sweeping: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    sweeping = sweepSpool(dir, olderThanMs).then(
      (files) => {
        if (files > 0) logger.warn({ spoolDir: dir, files }, 'abandoned spool files removed');
      },
      (err: unknown) => logger.warn({ err, spoolDir: dir }, 'the spool directory could not be swept'),
    );
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await sweeping;
  };
}

export interface Spooled {
  /** The spooled file, for MediaStore.putFile (or to remove). */
  path: string;
  size: number;
  /** Lowercase hex. */
  sha256: string;
}

/** The stream passed the size limit: it was left unread from there (not destroyed). */
export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`larger than ${limit} bytes`);
  }
}

/** The stream failed or closed before its end. */
export class CutShortError extends Error {}

/**
 * Writes `source` to a new file under `dir`, at most `limit` bytes. Rejects with TooLargeError past
 * the limit (the source is paused and its listeners removed, so the caller can still answer an HTTP
 * request before closing it) or CutShortError when it errs or closes before its end, even before
 * spool listens to it; then no file is left.
 */
export async function spool(source: Readable, dir: string, limit: number): Promise<Spooled> {
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${randomUUID()}.part`);
  const out = createWriteStream(file, { flags: 'wx' });
  const hash = createHash('sha256');
  let size = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (err?: Error): void => {
        if (done) return;
        done = true;
        source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
        out.off('drain', onDrain);
        if (err) {
          source.pause();
          out.destroy();
          reject(err);
        } else resolve();
      };
      const onData = (chunk: Buffer): void => {
        size += chunk.length;
        if (size > limit) return finish(new TooLargeError(limit));
        hash.update(chunk);
        if (!out.write(chunk)) source.pause();
      };
      const onDrain = (): void => {
        source.resume();
      };
      const onEnd = (): void => {
        source.off('close', onClose);
        out.end(() => finish());
      };
      const onError = (err: Error): void => finish(new CutShortError(err.message));
      const onClose = (): void => finish(new CutShortError('the stream closed before its end'));
      out.on('drain', onDrain);
      out.on('error', (err) => finish(err));
      source.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
      // Cut before it was listened to (its socket closed, or an idle or deadline limit destroyed it,
      // while the directory above was being made on a busy thread pool): its close came and went, and
      // no event is left to end the wait. A stream is only destroyed before its end when cut short.
      if (source.destroyed) return source.errored ? onError(source.errored) : onClose();
      source.resume();
    });
  } catch (err) {
    await new Promise<void>((resolve) => (out.closed ? resolve() : out.once('close', () => resolve())));
    await fs.rm(file, { force: true });
    throw err;
  }
  return { path: file, size, sha256: hash.digest('hex') };
}
