// An erased person's files: their media rows go in the erasure's transaction (GET /media/{id} is a
// 404 from its commit) with a job that deletes the bytes from the store after it (bytes cannot be
// rolled back, so they go only once the erasure committed; the job retries a store that fails).
import type { Db } from '../db/database.js';
import { deleteContactMedia, scrubContactAttachments } from '../db/media.js';
import { enqueue } from '../jobs/queue.js';
import type { QueueHandler } from '../jobs/worker.js';
import type { MediaStore } from './store.js';

export const MEDIA_DELETE_QUEUE = 'media-delete';

/** Deletes the contact's files and their messages' captions, and queues their bytes' deletion; in the erasure's transaction. */
export async function eraseContactMedia(trx: Db, workspaceId: string, contactId: string): Promise<void> {
  const keys = await deleteContactMedia(trx, workspaceId, contactId);
  await scrubContactAttachments(trx, workspaceId, contactId);
  if (keys.length > 0) await enqueue(trx, MEDIA_DELETE_QUEUE, { keys }, { workspaceId });
}

export function mediaDeleteHandler(store: MediaStore, options: { maxAttempts: number; retryBaseMs: number }): QueueHandler<typeof MEDIA_DELETE_QUEUE> {
  return {
    queue: MEDIA_DELETE_QUEUE,
    maxAttempts: options.maxAttempts,
    retryBaseMs: options.retryBaseMs,
    async run(job) {
      for (const key of job.payload.keys) await store.delete(key);
      return { kind: 'done' };
    },
    async giveUp() {
      // The worker logs the last error; the keys stay in the store for an operator to remove.
    },
  };
}
