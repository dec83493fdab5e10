// The stages of a workspace's funnel: positions 1..n without gaps, in funnel order. Every change of
// positions runs in a transaction that first locks the workspace's funnel (lockFunnel), so two
// changes never compute positions from the same state; a deferred unique constraint on
// (workspace_id, position) checks the result at commit.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { StageRow } from './schema.js';
import { listPage, listSource, type PageText } from './pagination.js';
import { NAME_MAX, normalizedName } from '../text.js';

export type Stage = components['schemas']['Stage'];

export function stageRowToStage(row: StageRow): Stage {
  return {
    id: row.id,
    name: row.name,
    position: row.position,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const stageList = listSource<Stage>(
  'stages',
  { id: 'id', name: 'name', position: 'position', createdAt: { instant: 'created_at' }, updatedAt: { instant: 'updated_at' } },
  { order: ['position'] },
);

export async function listStages(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<Stage>> {
  return listPage(db, stageList, [['workspace_id = ?', workspaceId]], { page, limit });
}

/** Inserts the first stages of a new workspace's funnel, at positions 1, 2, ... */
export async function insertInitialStages(db: Db, workspaceId: string, names: readonly string[], now: Date): Promise<StageRow[]> {
  if (names.length === 0) return [];
  return db
    .insertInto('stages')
    .values(names.map((name, i) => ({ workspace_id: workspaceId, id: uuidv7(), name, position: i + 1, created_at: now, updated_at: now })))
    .returningAll()
    .execute();
}

/**
 * Locks the workspace's funnel until the transaction ends and answers its number of stages. The
 * workspace row is locked FOR NO KEY UPDATE, which waits for other funnel changes but not for
 * inserts that merely reference the workspace.
 */
export async function lockFunnel(trx: Db, workspaceId: string): Promise<number> {
  await sql`select 1 from workspaces where id = ${workspaceId} for no key update`.execute(trx);
  const row = await trx
    .selectFrom('stages')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Inserts a stage at `position` (1..count+1, checked by the caller), moving the later ones down. */
export async function insertStage(trx: Db, workspaceId: string, name: string, position: number, now: Date): Promise<Stage> {
  await trx
    .updateTable('stages')
    .set((eb) => ({ position: eb('position', '+', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>=', position)
    .execute();
  const row = await trx
    .insertInto('stages')
    .values({ workspace_id: workspaceId, id: uuidv7(), name: normalizedName(name, NAME_MAX), position, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
  return stageRowToStage(row);
}

export async function findStage(trx: Db, workspaceId: string, id: string): Promise<StageRow | undefined> {
  return trx.selectFrom('stages').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
}

/**
 * Renames and/or moves a stage (position 1..count, checked by the caller); the stages between its
 * old and new places shift by one toward the place it left.
 */
export async function updateStage(
  trx: Db,
  workspaceId: string,
  stage: StageRow,
  change: { name?: string | undefined; position?: number | undefined },
  now: Date,
): Promise<Stage> {
  const to = change.position ?? stage.position;
  const from = stage.position;
  if (to !== from) {
    await sql`
      update stages
         set position = case when position < ${from}::int then position + 1 else position - 1 end, updated_at = ${now}::timestamptz
       where workspace_id = ${workspaceId}
         and position between least(${from}::int, ${to}::int) and greatest(${from}::int, ${to}::int)
         and id <> ${stage.id}`.execute(trx);
  }
  const row = await trx
    .updateTable('stages')
    .set({ ...(change.name !== undefined && { name: normalizedName(change.name, NAME_MAX) }), position: to, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', stage.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return stageRowToStage(row);
}

/**
 * Deletes a stage and moves the later ones up. A thread still in the stage fails the threads' foreign
 * key (23503), which the caller answers as a conflict.
 */
export async function deleteStage(trx: Db, workspaceId: string, stage: StageRow, now: Date): Promise<void> {
  await trx.deleteFrom('stages').where('workspace_id', '=', workspaceId).where('id', '=', stage.id).execute();
  await trx
    .updateTable('stages')
    .set((eb) => ({ position: eb('position', '-', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>', stage.position)
    .execute();
}
