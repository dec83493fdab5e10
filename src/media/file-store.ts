// MEDIA_STORE=file:<dir>: each file at <dir>/<key>, spooled under <dir>/.spool and renamed into
// place (one file system, so a file appears whole or not at all).
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { ByteRange, MediaStore } from './store.js';

export function fileStore(dir: string): MediaStore {
  const spoolDir = path.join(dir, '.spool');
  const at = (key: string): string => {
    const file = path.resolve(dir, key);
    if (!file.startsWith(dir + path.sep)) throw new Error(`media key outside the store: ${key}`);
    return file;
  };
  return {
    spoolDir,
    async putFile(key, from) {
      const file = at(key);
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.rename(from, file);
    },
    async get(key, range?: ByteRange): Promise<Readable> {
      const stream = createReadStream(at(key), range ? { start: range.start, end: range.end } : {});
      // Opened before it is answered: a missing file is an error here, not in the middle of a response.
      await new Promise<void>((resolve, reject) => {
        stream.once('open', () => resolve());
        stream.once('error', reject);
      });
      return stream;
    },
    async delete(key) {
      await fs.rm(at(key), { force: true });
    },
  };
}
