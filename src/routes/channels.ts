// Handler of the Channels operation.
import { listChannels } from '../db/channels.js';
import { paging, type Handlers } from './handler.js';

export const channelHandlers: Pick<Handlers, 'listChannels'> = {
  async listChannels({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await listChannels(db, auth.workspaceId, page, limit) };
  },
};
