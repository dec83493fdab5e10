// The media store MEDIA_STORE names: a directory (file-store.ts) or an S3 bucket (s3-store.ts).
import type { MediaStoreConfig } from '../config.js';
import { fileStore } from './file-store.js';
import { s3Store } from './s3-store.js';
import type { MediaStore } from './store.js';

export function openMediaStore(config: MediaStoreConfig): MediaStore {
  return config.kind === 'file' ? fileStore(config.dir) : s3Store(config);
}
