// Creating and erasing contacts with their events: contact.created is recorded here only, in the
// transaction that inserts the contact, whether an API key created it or a customer wrote first.
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import {
  contactRowToContact,
  eraseContact as eraseContactRecords,
  findContactIdByKey,
  insertContact,
  insertContactByKey,
  type Contact,
  type ContactKey,
} from '../db/contacts.js';
import type { Db } from '../db/database.js';
import { recordEvent, scrubContactEvents } from '../events/record.js';
import { eraseContactMedia } from '../media/erase.js';

type ContactCreate = components['schemas']['ContactCreate'];

/** The one emitter of contact.created. */
async function contactCreated(trx: Db, workspaceId: string, contact: Contact, actor: Actor, now: Date): Promise<void> {
  await recordEvent(trx, workspaceId, 'contact.created', contact, actor, now);
}

/** Creates a contact with its event; undefined when another contact has its phone or Instagram id. Run it in a transaction. */
export async function createContact(trx: Db, workspaceId: string, input: ContactCreate, actor: Actor): Promise<Contact | undefined> {
  const now = new Date();
  const contact = await insertContact(trx, workspaceId, input, now);
  if (contact) await contactCreated(trx, workspaceId, contact, actor, now);
  return contact;
}

/**
 * The contact known by `key`, or a new one named `name` with its event: run it in a transaction.
 * Concurrent callers end with the same contact (the unique index decides, the loser reads the winner's).
 */
export async function findOrCreateContact(trx: Db, workspaceId: string, key: ContactKey, name: string, now: Date, actor: Actor): Promise<string> {
  const found = await findContactIdByKey(trx, workspaceId, key);
  if (found) return found;
  const inserted = await insertContactByKey(trx, workspaceId, key, name, now);
  if (inserted) {
    await contactCreated(trx, workspaceId, contactRowToContact(inserted), actor, now);
    return inserted.id;
  }
  const winner = await findContactIdByKey(trx, workspaceId, key);
  if (!winner) throw new Error('the contact that won the insert is gone');
  return winner;
}

/** Erases a contact (their files too) and scrubs its events the same way; false when there is no such contact. Run it in a transaction. */
export async function eraseContact(trx: Db, workspaceId: string, id: string, now: Date): Promise<boolean> {
  if (!(await eraseContactRecords(trx, workspaceId, id, now))) return false;
  await eraseContactMedia(trx, workspaceId, id);
  await scrubContactEvents(trx, workspaceId, id);
  return true;
}
