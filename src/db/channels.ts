// Channels of a workspace: sandbox or connected to Meta; a channel's default agent takes the
// threads opened on it. The Meta secrets column holds sealed text (src/secrets.ts) and
// never leaves this module's rows for the wire.
import { CompiledQuery, type Transaction } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import { readWithNext, type ReadWithNext } from './pg-driver.js';
import type { ChannelRow, Database } from './schema.js';
import { listPage, listSource, type PageText } from './pagination.js';

export type Channel = components['schemas']['Channel'];

export const webhookPathOf = (id: string): string => `/webhooks/meta/${id}`;

export function channelRowToChannel(row: ChannelRow): Channel {
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    provider: row.provider,
    externalId: row.external_id,
    webhookPath: row.provider === 'meta' ? webhookPathOf(row.id) : null,
    defaultAgentId: row.default_agent_id,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const channelList = listSource<Channel>('channels', {
  id: 'id',
  type: 'type',
  name: 'name',
  provider: 'provider',
  externalId: 'external_id',
  // webhookPathOf in SQL.
  webhookPath: { sql: `case when p.provider = 'meta' then '/webhooks/meta/' || p.id end` },
  defaultAgentId: 'default_agent_id',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

export async function listChannels(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<Channel>> {
  return listPage(db, channelList, [['workspace_id = ?', workspaceId]], { page, limit });
}

/** The channel's row; with `lock`, locked until the caller's transaction ends. */
export async function getChannelRow(db: Db, workspaceId: string, id: string, options: { lock?: boolean } = {}): Promise<ChannelRow | undefined> {
  const query = db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id);
  return (options.lock ? query.forUpdate() : query).executeTakeFirst();
}

/** A channel by id alone, whatever its workspace: Meta's webhooks name nothing else. */
/** Fixed text (prepared once per connection): every Meta delivery starts with it. */
const CHANNEL_BY_ID = 'select * from channels where id = $1';

export async function findChannelById(db: Db, id: string): Promise<ChannelRow | undefined> {
  const { rows } = await db.executeQuery<ChannelRow>(CompiledQuery.raw(CHANNEL_BY_ID, [id]));
  return rows[0];
}

/** The channel's row as it is now, read with the transaction's next statement (pg-driver.ts readWithNext): no round trip of its own. */
export function channelWithNext(trx: Transaction<Database>, id: string): Promise<ReadWithNext<ChannelRow>> {
  return readWithNext<ChannelRow>(trx, CompiledQuery.raw(CHANNEL_BY_ID, [id]));
}

/** Whether two rows of a channel say the same in every column. */
export function sameChannelRow(a: ChannelRow, b: ChannelRow): boolean {
  const same = (x: unknown, y: unknown): boolean => (x instanceof Date && y instanceof Date ? x.getTime() === y.getTime() : x === y);
  const columns = Object.keys(a) as Array<keyof ChannelRow>;
  return columns.length === Object.keys(b).length && columns.every((column) => same(a[column], b[column]));
}

export interface ChannelValues {
  type: ChannelRow['type'];
  name: string;
  provider: ChannelRow['provider'];
  externalId: string | null;
  sealedSecrets: string | null;
  /** Left out: unchanged. */
  defaultAgentId?: string | null;
}

export async function insertChannel(db: Db, workspaceId: string, values: ChannelValues): Promise<ChannelRow> {
  const now = new Date();
  return db
    .insertInto('channels')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      type: values.type,
      name: values.name,
      provider: values.provider,
      external_id: values.externalId,
      secrets: values.sealedSecrets,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Replaces a channel's settings; undefined when the workspace has no such channel. */
export async function updateChannelRow(db: Db, workspaceId: string, id: string, values: Omit<ChannelValues, 'type'>): Promise<ChannelRow | undefined> {
  return db
    .updateTable('channels')
    .set({
      name: values.name,
      provider: values.provider,
      external_id: values.externalId,
      secrets: values.sealedSecrets,
      ...(values.defaultAgentId !== undefined && { default_agent_id: values.defaultAgentId }),
      updated_at: new Date(),
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Every channel whose secrets were sealed with another key than `keyId` (for a key rotation). */
export async function listChannelsWithStaleSecrets(db: Db, keyId: string): Promise<Array<Pick<ChannelRow, 'workspace_id' | 'id' | 'secrets'>>> {
  return db
    .selectFrom('channels')
    .select(['workspace_id', 'id', 'secrets'])
    .where('secrets', 'is not', null)
    .where('secrets', 'not like', `v1.${keyId}.%`)
    .execute();
}

/** Re-seals one channel's secrets, unless they changed meanwhile; true when written. */
export async function resealChannelSecrets(db: Db, workspaceId: string, id: string, before: string, after: string): Promise<boolean> {
  const result = await db
    .updateTable('channels')
    .set({ secrets: after })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('secrets', '=', before)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Whether any channel is connected to Meta (its secrets then need SECRETS_KEY). */
/** The id of the workspace's channel (other than `except`) connected to this Meta account, if one is. */
export async function metaAccountHolder(
  db: Db,
  workspaceId: string,
  type: ChannelRow['type'],
  externalId: string,
  except?: string,
): Promise<string | undefined> {
  let query = db.selectFrom('channels').select('id').where('workspace_id', '=', workspaceId).where('type', '=', type).where('external_id', '=', externalId);
  if (except !== undefined) query = query.where('id', '<>', except);
  return (await query.executeTakeFirst())?.id;
}

export async function anyMetaChannel(db: Db): Promise<boolean> {
  const row = await db.selectFrom('channels').select('id').where('provider', '=', 'meta').limit(1).executeTakeFirst();
  return row !== undefined;
}
