// Handlers of the media operations: uploads (the body spooled by media/upload.ts) and downloads.
import { ApiError } from '../errors.js';
import { serveFile, storedFile, storeUpload } from '../media/files.js';
import type { MediaStore } from '../media/store.js';
import type { Handlers, Services } from './handler.js';

function mediaStore(services: Services): MediaStore {
  if (!services.media) throw new ApiError(503, 'service_unavailable', 'Media files are not available on this instance.');
  return services.media;
}

export const mediaHandlers: Pick<Handlers, 'uploadMedia' | 'getMedia'> = {
  async uploadMedia({ db, auth, query, services, upload }) {
    const store = mediaStore(services);
    // The contract lets no request without its body through to here: the upload middleware spooled it.
    return { status: 201, body: await storeUpload(db, store, auth.workspaceId, upload!, query.filename ?? null) };
  },

  async getMedia({ db, auth, params, services }) {
    const store = mediaStore(services);
    const row = await storedFile(db, auth.workspaceId, params.id);
    return { status: 200, stream: (req, res) => serveFile(store, row, req, res) };
  },
};
