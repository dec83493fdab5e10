// Channels: read-only over the API; created with their workspace.
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ChannelRow } from './schema.js';
import { pageOf, totalCount, type Page } from './pagination.js';

export type Channel = components['schemas']['Channel'];

export function channelRowToChannel(row: ChannelRow): Channel {
  return { id: row.id, type: row.type, name: row.name };
}

export async function listChannels(db: Db, workspaceId: string, page: number, limit: number): Promise<Page<Channel>> {
  const base = db.selectFrom('channels').where('workspace_id', '=', workspaceId);
  const rows = await base
    .selectAll()
    .select(totalCount())
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .offset((page - 1) * limit)
    .execute();
  return pageOf(rows, channelRowToChannel, page, limit, base);
}
