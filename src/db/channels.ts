// Channels: read-only over the API; created with their workspace.
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ChannelRow } from './schema.js';
import { listPage, listSource, type PageText } from './pagination.js';

export type Channel = components['schemas']['Channel'];

export function channelRowToChannel(row: ChannelRow): Channel {
  return { id: row.id, type: row.type, name: row.name };
}

const channelList = listSource<Channel>('channels', { id: 'id', type: 'type', name: 'name' });

export async function listChannels(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<Channel>> {
  return listPage(db, channelList, [['workspace_id = ?', workspaceId]], { page, limit });
}
