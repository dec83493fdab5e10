// A customer's files, held: each file a message brings is a `pending` media row with the job that
// fetches it from Meta (media/fetch.ts), written in the message's own transaction.
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../db/database.js';
import { insertPendingMedia } from '../db/media.js';
import type { Attachment, MediaSource, MediaType } from '../db/schema.js';
import { enqueue } from '../jobs/queue.js';
import { digestBytes } from './types.js';

/** A file a customer's message carries, as its channel announces it (Meta: channels/webhook.ts): where to fetch it, and what it should be. */
export interface InboundMedia {
  type: MediaType;
  /** Announced by WhatsApp; for Instagram a stand-in of its type until the download tells. */
  mimeType: string;
  /** WhatsApp's announced SHA-256 (hex or base64), checked against the bytes. */
  sha256?: string | undefined;
  filename?: string | undefined;
  caption?: string | undefined;
  source: MediaSource;
}

export interface PendingFile {
  media: InboundMedia;
  /** What the message shows of it until it is fetched. */
  attachment: Attachment;
}

/** The files of an inbound message, each with its new media id, as the message shows them while pending (the SHA-256 Meta announced, if any). */
export function pendingFiles(media: InboundMedia[] | undefined): PendingFile[] {
  return (media ?? []).map((m) => ({
    media: m,
    attachment: {
      id: uuidv7(),
      type: m.type,
      mimeType: m.mimeType,
      size: null,
      // What Meta announced, in the contract's lowercase hex, until the bytes are stored (and checked against it).
      sha256: (m.sha256 !== undefined && digestBytes(m.sha256)?.toString('hex')) || null,
      filename: m.filename ?? null,
      caption: m.caption ?? null,
      status: 'pending',
    },
  }));
}

/** Stores the pending files of a stored inbound message and queues their fetch; in its transaction. */
export async function holdInboundMedia(
  db: Db,
  workspaceId: string,
  owner: { channelId: string; contactId: string; messageId: string },
  files: PendingFile[],
  now: Date,
): Promise<void> {
  for (const { media, attachment } of files) {
    await insertPendingMedia(
      db,
      workspaceId,
      {
        id: attachment.id,
        type: media.type,
        mimeType: media.mimeType,
        size: null,
        sha256: null,
        filename: attachment.filename,
        contactId: owner.contactId,
        source: 'whatsappMediaId' in media.source ? { ...media.source, ...(media.sha256 && { sha256: media.sha256 }) } : media.source,
      },
      now,
    );
    await enqueue(db, 'media-fetch', { mediaId: attachment.id, messageId: owner.messageId, channelId: owner.channelId }, { workspaceId, createdAt: now });
  }
}
