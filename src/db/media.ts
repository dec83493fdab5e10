// Media files of a workspace: their facts and where their bytes are in the media store (src/media/).
import { sql } from 'kysely';
import type { Db } from './database.js';
import type { Attachment, MediaRow, MediaSource, MediaType } from './schema.js';

/** The API's Attachment of a media row (`caption` is the message's: none for an upload). */
export function mediaRowToAttachment(row: MediaRow, caption: string | null = null): Attachment {
  return {
    id: row.id,
    type: row.type,
    mimeType: row.mime_type,
    size: row.size === null ? null : Number(row.size),
    sha256: row.sha256,
    filename: row.filename,
    caption,
    status: row.status,
  };
}

export interface StoredMedia {
  id: string;
  type: MediaType;
  mimeType: string;
  size: number;
  sha256: string;
  filename: string | null;
  storageKey: string;
}

/** An upload, stored. */
export async function insertStoredMedia(db: Db, workspaceId: string, media: StoredMedia, now: Date): Promise<MediaRow> {
  return db
    .insertInto('media')
    .values({
      workspace_id: workspaceId,
      id: media.id,
      type: media.type,
      mime_type: media.mimeType,
      size: media.size,
      sha256: media.sha256,
      filename: media.filename,
      status: 'stored',
      storage_key: media.storageKey,
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface PendingMedia {
  id: string;
  type: MediaType;
  mimeType: string;
  size: number | null;
  sha256: string | null;
  filename: string | null;
  contactId: string;
  source: MediaSource;
}

/** An inbound file Meta has, before its job fetched it. */
export async function insertPendingMedia(db: Db, workspaceId: string, media: PendingMedia, now: Date): Promise<MediaRow> {
  return db
    .insertInto('media')
    .values({
      workspace_id: workspaceId,
      id: media.id,
      type: media.type,
      mime_type: media.mimeType,
      size: media.size,
      sha256: media.sha256,
      filename: media.filename,
      status: 'pending',
      contact_id: media.contactId,
      source: JSON.stringify(media.source),
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findMedia(db: Db, workspaceId: string, id: string): Promise<MediaRow | undefined> {
  return db.selectFrom('media').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
}

/** The stored media of these ids (uploads to send); those missing or not stored are left out. */
export async function findStoredMedia(db: Db, workspaceId: string, ids: string[]): Promise<MediaRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('media').selectAll().where('workspace_id', '=', workspaceId).where('id', 'in', ids).where('status', '=', 'stored').execute();
}

/** A pending file's bytes are stored: its facts as fetched (a query to run; it returns the row when it moved). */
export function markMediaStored(db: Db, workspaceId: string, id: string, stored: { size: number; sha256: string; mimeType: string; storageKey: string }) {
  return db
    .updateTable('media')
    .set({ status: 'stored', size: stored.size, sha256: stored.sha256, mime_type: stored.mimeType, storage_key: stored.storageKey })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .returningAll();
}

/** A pending file could not be fetched (a query to run; it returns the row when it moved). */
export function markMediaFailed(db: Db, workspaceId: string, id: string) {
  return db
    .updateTable('media')
    .set({ status: 'failed' })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .returningAll();
}

/** Deletes an erased person's files; returns the store keys whose bytes are to be deleted. */
export async function deleteContactMedia(db: Db, workspaceId: string, contactId: string): Promise<string[]> {
  const rows = await db.deleteFrom('media').where('workspace_id', '=', workspaceId).where('contact_id', '=', contactId).returning('storage_key').execute();
  return rows.flatMap((r) => (r.storage_key ? [r.storage_key] : []));
}

/**
 * Statement builder: the attachment `mediaId` of a message, in its `attachments`, patched with
 * `patch` (the media's new status and facts). The message as it now is; no row when none carries it.
 */
export function patchMessageAttachment(db: Db, workspaceId: string, messageId: string, mediaId: string, patch: Partial<Attachment>) {
  return db
    .updateTable('messages')
    .set({
      attachments: sql<string>`(select coalesce(jsonb_agg(case when a->>'id' = ${mediaId} then a || ${JSON.stringify(patch)}::jsonb else a end order by n), '[]'::jsonb)
                                  from jsonb_array_elements(messages.attachments) with ordinality as e(a, n))`,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', messageId)
    .returningAll();
}

/** An erased person's messages keep their attachments' facts, without captions or file names. */
export async function scrubContactAttachments(db: Db, workspaceId: string, contactId: string): Promise<void> {
  await sql`
    update messages
       set attachments = (select jsonb_agg(a || '{"caption": null, "filename": null}'::jsonb order by n)
                            from jsonb_array_elements(messages.attachments) with ordinality as e(a, n))
     where workspace_id = ${workspaceId}
       and thread_id in (select t.id from threads t where t.workspace_id = ${workspaceId} and t.contact_id = ${contactId})
       and contact_id = ${contactId}
       and attachments <> '[]'::jsonb`.execute(db);
}
