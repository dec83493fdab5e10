// The media store: where files' bytes live, a directory or an S3 bucket (MEDIA_STORE). Keys are
// made by the service (`<workspace>/<media id>`), never from input. Bytes stream in and out; a file
// is written whole (from a spooled upload or download whose size and SHA-256 are known) or not at all.
// open-store.ts opens the one MEDIA_STORE names.
import type { Readable } from 'node:stream';

/** A byte range, both ends inclusive. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface MediaStore {
  /** A directory on the local disk where uploads and downloads are spooled before they are stored. */
  readonly spoolDir: string;
  /** Stores the spooled file at `path` (`size` bytes) under `key`, taking it (it is gone after). */
  putFile(key: string, path: string, size: number, contentType: string): Promise<void>;
  /** The stored bytes of `key` (a `range` of them) as a stream. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Deletes `key`; nothing when it is not there. */
  delete(key: string): Promise<void>;
}

/** The key of a workspace's media file: of ids the service made, never of input. */
export const mediaKey = (workspaceId: string, mediaId: string): string => `${workspaceId}/${mediaId}`;
