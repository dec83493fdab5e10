// Workspaces, and the channels and funnel stages every new workspace starts with.
import { v7 as uuidv7 } from 'uuid';
import type { Db } from './database.js';
import type { ChannelRow } from './schema.js';
import { insertInitialStages } from './stages.js';

export async function workspaceExists(db: Db, workspaceId: string): Promise<boolean> {
  const row = await db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).executeTakeFirst();
  return row !== undefined;
}

/** Creates a workspace with one WhatsApp and one Instagram channel and a funnel of these stages, in order. */
export async function createWorkspace(db: Db, name: string, stageNames: readonly string[] = []): Promise<{ workspaceId: string; channels: ChannelRow[] }> {
  return db.transaction().execute(async (trx) => {
    const workspaceId = uuidv7();
    await trx.insertInto('workspaces').values({ id: workspaceId, name }).execute();
    const channels = await trx
      .insertInto('channels')
      .values([
        { workspace_id: workspaceId, id: uuidv7(), type: 'whatsapp', name: 'WhatsApp' },
        { workspace_id: workspaceId, id: uuidv7(), type: 'instagram', name: 'Instagram' },
      ])
      .returningAll()
      .execute();
    await insertInitialStages(trx, workspaceId, stageNames, new Date());
    return { workspaceId, channels };
  });
}

export async function listWorkspaceChannels(db: Db, workspaceId: string): Promise<ChannelRow[]> {
  return db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
}
