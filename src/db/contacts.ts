// Contacts of a workspace; a phone is unique within it. An erased contact keeps its row (its threads
// and messages refer to it) without any personal data, and exists for no read or change.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ContactAttributes, ContactRow } from './schema.js';
import { hasLabels, labelKeys } from './labels.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type Contact = components['schemas']['Contact'];
type ContactCreate = components['schemas']['ContactCreate'];

/** A contact's new values: labels already kept as they are stored (services/labels.ts), attributes whole. */
export interface ContactValues {
  name?: string;
  phone?: string | null;
  email?: string | null;
  labels?: string[];
  attributes?: ContactAttributes;
}

export interface ContactFilter {
  q?: string | undefined;
  phone?: string | undefined;
  email?: string | undefined;
  instagramId?: string | undefined;
  /** Every one of these labels (case-insensitive). */
  labels?: readonly string[] | undefined;
}

export function contactRowToContact(row: ContactRow): Contact {
  return {
    id: row.id,
    name: row.name,
    phone: row.phone,
    email: row.email,
    instagramId: row.instagram_id,
    labels: row.labels,
    attributes: row.attributes,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const contactList = listSource<Contact>('contacts', {
  id: 'id',
  name: 'name',
  phone: 'phone',
  email: 'email',
  instagramId: 'instagram_id',
  labels: 'labels',
  attributes: 'attributes',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listContacts(db: Db, workspaceId: string, filter: ContactFilter, page: number, limit: number): Promise<PageText<Contact>> {
  const where: Condition[] = [['workspace_id = ? and erased_at is null', workspaceId]];
  if (filter.phone) where.push(['phone = ?', filter.phone]);
  if (filter.email) where.push(['lower(email) = ?', filter.email.toLowerCase()]);
  if (filter.instagramId) where.push(['instagram_id = ?', filter.instagramId]);
  if (filter.labels?.length) where.push(hasLabels(workspaceId, filter.labels));
  if (filter.q) where.push(['(name ilike ? or phone ilike ? or email ilike ?)', `%${likeEscape(filter.q)}%`]);
  // A label's matches come from its GIN index first (pagination.ts says why).
  return listPage(db, contactList, where, { page, limit, matchesFirst: Boolean(filter.labels?.length) });
}

export async function getContact(db: Db, workspaceId: string, id: string): Promise<Contact | undefined> {
  const row = await db
    .selectFrom('contacts')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
  return row && contactRowToContact(row);
}

export async function findContactIdByPhone(db: Db, workspaceId: string, phone: string): Promise<string | undefined> {
  const row = await db.selectFrom('contacts').select('id').where('workspace_id', '=', workspaceId).where('phone', '=', phone).executeTakeFirst();
  return row?.id;
}

export async function findContactIdByInstagramId(db: Db, workspaceId: string, instagramId: string): Promise<string | undefined> {
  const row = await db.selectFrom('contacts').select('id').where('workspace_id', '=', workspaceId).where('instagram_id', '=', instagramId).executeTakeFirst();
  return row?.id;
}

/**
 * Inserts a contact, its labels as given (kept as services/labels.ts keeps them); undefined when
 * another contact of the workspace already has the phone or Instagram id.
 */
export async function insertContact(db: Db, workspaceId: string, input: ContactCreate, now: Date = new Date()): Promise<Contact | undefined> {
  const labels = input.labels ?? [];
  const row = await db
    .insertInto('contacts')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      name: input.name,
      phone: input.phone ?? null,
      email: input.email ?? null,
      instagram_id: input.instagramId ?? null,
      labels,
      label_keys: labelKeys(workspaceId, labels),
      attributes: JSON.stringify(input.attributes ?? {}),
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
  return row && contactRowToContact(row);
}

/** How a customer who writes is known: their phone (WhatsApp) or Instagram-scoped id. */
export type ContactKey = { phone: string } | { instagramId: string };

const keyColumn = (key: ContactKey): { column: 'phone' | 'instagram_id'; value: string } =>
  'phone' in key ? { column: 'phone', value: key.phone } : { column: 'instagram_id', value: key.instagramId };

/** The id of the contact known by `key`, if any. */
export async function findContactIdByKey(db: Db, workspaceId: string, key: ContactKey): Promise<string | undefined> {
  const { column, value } = keyColumn(key);
  const found = await db.selectFrom('contacts').select('id').where('workspace_id', '=', workspaceId).where(column, '=', value).executeTakeFirst();
  return found?.id;
}

/** Inserts the contact known by `key`, named `name`; undefined when another caller inserted it first (the unique index decides). */
export async function insertContactByKey(db: Db, workspaceId: string, key: ContactKey, name: string, now: Date): Promise<ContactRow | undefined> {
  const { column, value } = keyColumn(key);
  return db
    .insertInto('contacts')
    .values({ workspace_id: workspaceId, id: uuidv7(), name, phone: null, email: null, [column]: value, created_at: now, updated_at: now })
    .onConflict((oc) => oc.columns(['workspace_id', column]).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** The live (unerased) contact's row, locked until the transaction ends: a change is planned from it. */
export async function lockContact(trx: Db, workspaceId: string, id: string): Promise<ContactRow | undefined> {
  return trx
    .selectFrom('contacts')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * Writes a contact's new values (null clears phone or email; labels with their keys, attributes
 * whole); undefined when it does not exist. A phone another contact holds fails the unique index
 * contacts_phone_key (23505).
 */
export async function updateContact(db: Db, workspaceId: string, id: string, values: ContactValues, now: Date): Promise<Contact | undefined> {
  const row = await db
    .updateTable('contacts')
    .set({
      ...(values.name !== undefined && { name: values.name }),
      ...(values.phone !== undefined && { phone: values.phone }),
      ...(values.email !== undefined && { email: values.email }),
      ...(values.labels !== undefined && { labels: values.labels, label_keys: labelKeys(workspaceId, values.labels) }),
      ...(values.attributes !== undefined && { attributes: JSON.stringify(values.attributes) }),
      updated_at: now,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('erased_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
  return row && contactRowToContact(row);
}

/**
 * Erases a contact: its name, phone, email, labels and attributes go, and the content of its messages; its threads,
 * their history and NPS answers stay (they hold no personal data), so every statistic is unchanged.
 * Its events are the caller's to scrub (services/contacts.ts eraseContact).
 * False when there is no such (unerased) contact. Run it in a transaction.
 */
export async function eraseContact(trx: Db, workspaceId: string, id: string, now: Date): Promise<boolean> {
  const erased = await trx
    .updateTable('contacts')
    .set({ name: '', phone: null, email: null, instagram_id: null, labels: [], label_keys: [], attributes: '{}', erased_at: now, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('erased_at', 'is', null)
    .returning('id')
    .executeTakeFirst();
  if (!erased) return false;
  // Through the contact's threads, so the messages' list index finds them.
  await sql`
    update messages set content = null, interactive = null
     where workspace_id = ${workspaceId}
       and thread_id in (select t.id from threads t where t.workspace_id = ${workspaceId} and t.contact_id = ${id})
       and contact_id = ${id}
       and (content is not null or interactive is not null)`.execute(trx);
  return true;
}
