// Channels: read-only over the API; created with their workspace.
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ChannelRow } from './schema.js';
import { listPage, type Page } from './pagination.js';

export type Channel = components['schemas']['Channel'];

export function channelRowToChannel(row: ChannelRow): Channel {
  return { id: row.id, type: row.type, name: row.name };
}

export async function listChannels(db: Db, workspaceId: string, page: number, limit: number): Promise<Page<Channel>> {
  const base = db.selectFrom('channels').where('workspace_id', '=', workspaceId);
  return listPage(base, { page, limit }, channelRowToChannel);
}
