// Handlers of the Channels operations.
import { getChannelRow, listChannels } from '../db/channels.js';
import { receiveSandboxInbound } from '../channels/inbound.js';
import { createChannel, getChannel, updateChannel } from '../channels/settings.js';
import { notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

export const channelHandlers: Pick<Handlers, 'listChannels' | 'getChannel' | 'createChannel' | 'updateChannel' | 'simulateSandboxInbound'> = {
  async listChannels({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await listChannels(db, auth.workspaceId, page, limit) };
  },

  async getChannel({ db, auth, params }) {
    return { status: 200, body: await getChannel(db, auth.workspaceId, params.id) };
  },

  async createChannel({ db, auth, body, services }) {
    return { status: 201, body: await createChannel(db, services.secrets, auth.workspaceId, body) };
  },

  async updateChannel({ db, auth, params, body, services }) {
    const channel = await updateChannel(db, services.secrets, auth.workspaceId, params.id, body);
    if (!channel) throw notFound('Channel');
    return { status: 200, body: channel };
  },

  async simulateSandboxInbound({ db, auth, params, body }) {
    const channel = await getChannelRow(db, auth.workspaceId, params.id);
    return { status: 201, body: await receiveSandboxInbound(db, auth.workspaceId, channel, body) };
  },
};
