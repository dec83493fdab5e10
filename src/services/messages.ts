// Sending a message: append to the open thread of (contact, channel), or open one for it.
import type { Db } from '../db/database.js';
import { appendToOpenThread, insertMessage, messageRowToMessage, type Message, type OutboundMessage } from '../db/messages.js';
import { insertOpenThread } from '../db/threads.js';

const MAX_ATTEMPTS = 5;

/**
 * The common case (an open thread exists) is one statement. Otherwise a thread is opened with the
 * message in one transaction; when a concurrent send opened it first, the unique index makes this
 * insert a no-op and the message goes into the winner's thread on the next attempt.
 */
export async function sendMessage(db: Db, workspaceId: string, message: OutboundMessage): Promise<Message> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const now = new Date();
    const appended = await appendToOpenThread(db, workspaceId, message, now);
    if (appended) return messageRowToMessage(appended);

    const opened = await db.transaction().execute(async (trx) => {
      const thread = await insertOpenThread(trx, workspaceId, { ...message, lastMessageAt: now }, now);
      return thread && insertMessage(trx, workspaceId, thread.id, message, now);
    });
    if (opened) return messageRowToMessage(opened);
  }
  throw new Error(`no open thread for contact ${message.contactId} and channel ${message.channelId} after ${MAX_ATTEMPTS} attempts`);
}
