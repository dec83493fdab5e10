// Creating, changing and erasing contacts with their events: contact.created and contact.updated are
// recorded here only, in the transaction of the change, whether an API key created the contact or a
// customer wrote first. A change that changes nothing records nothing.
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import {
  contactRowToContact,
  eraseContact as eraseContactRecords,
  findContactIdByKey,
  insertContact,
  insertContactByKey,
  lockContact,
  updateContact as writeContact,
  type Contact,
  type ContactKey,
  type ContactValues,
} from '../db/contacts.js';
import type { ContactRow } from '../db/schema.js';
import type { Db } from '../db/database.js';
import { recordEvent, scrubContactEvents } from '../events/record.js';
import { eraseContactMedia } from '../media/erase.js';
import { mergeAttributes, normalizeLabels, sameAttributes, sameLabels } from './labels.js';
import { normalizeText } from '../text.js';

type ContactCreate = components['schemas']['ContactCreate'];
type ContactUpdate = components['schemas']['ContactUpdate'];

/** The one emitter of contact.created. */
async function contactCreated(trx: Db, workspaceId: string, contact: Contact, actor: Actor, now: Date): Promise<void> {
  await recordEvent(trx, workspaceId, 'contact.created', contact, actor, now);
}

/** Creates a contact with its event; undefined when another contact has its phone or Instagram id. Run it in a transaction. */
export async function createContact(trx: Db, workspaceId: string, input: ContactCreate, actor: Actor): Promise<Contact | undefined> {
  const now = new Date();
  const contact = await insertContact(
    trx,
    workspaceId,
    { ...input, name: normalizeText(input.name), ...(input.labels && { labels: normalizeLabels(input.labels) }) },
    now,
  );
  if (contact) await contactCreated(trx, workspaceId, contact, actor, now);
  return contact;
}

/**
 * The values `patch` changes on `row`: the name in NFC, labels kept as services/labels.ts keeps them, attributes
 * merged (a 400 past the limit); fields equal to the current value are left out. Pure.
 */
export function planContactChange(row: ContactRow, patch: ContactUpdate): ContactValues {
  const values: ContactValues = {};
  const name = patch.name === undefined ? undefined : normalizeText(patch.name);
  if (name !== undefined && name !== row.name) values.name = name;
  if (patch.phone !== undefined && patch.phone !== row.phone) values.phone = patch.phone;
  if (patch.email !== undefined && patch.email !== row.email) values.email = patch.email;
  if (patch.labels !== undefined) {
    const labels = normalizeLabels(patch.labels);
    if (!sameLabels(labels, row.labels)) values.labels = labels;
  }
  if (patch.attributes !== undefined) {
    const attributes = mergeAttributes(row.attributes, patch.attributes);
    if (!sameAttributes(attributes, row.attributes)) values.attributes = attributes;
  }
  return values;
}

/**
 * Changes a contact (name, phone, email, labels, attributes) with its contact.updated, the one
 * emitter of that type; concurrent changes of one contact apply one after another (the row is
 * locked while it is planned and written). Undefined when there is no such contact. Run it in a transaction.
 */
export async function updateContact(trx: Db, workspaceId: string, id: string, patch: ContactUpdate, actor: Actor): Promise<Contact | undefined> {
  const row = await lockContact(trx, workspaceId, id);
  if (!row) return undefined;
  const values = planContactChange(row, patch);
  if (Object.keys(values).length === 0) return contactRowToContact(row);
  const now = new Date();
  const contact = await writeContact(trx, workspaceId, id, values, now);
  if (contact) await recordEvent(trx, workspaceId, 'contact.updated', contact, actor, now);
  return contact;
}

/**
 * The contact known by `key`, or a new one named `name` (in NFC) with its event: run it in a transaction.
 * Concurrent callers end with the same contact (the unique index decides, the loser reads the winner's).
 */
export async function findOrCreateContact(trx: Db, workspaceId: string, key: ContactKey, name: string, now: Date, actor: Actor): Promise<string> {
  const found = await findContactIdByKey(trx, workspaceId, key);
  if (found) return found;
  const inserted = await insertContactByKey(trx, workspaceId, key, normalizeText(name), now);
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
