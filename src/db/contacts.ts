// Contacts of a workspace; a phone is unique within it.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ContactRow } from './schema.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';

export type Contact = components['schemas']['Contact'];
type ContactCreate = components['schemas']['ContactCreate'];

export interface ContactFilter {
  q?: string | undefined;
  phone?: string | undefined;
  email?: string | undefined;
}

export function contactRowToContact(row: ContactRow): Contact {
  return {
    id: row.id,
    name: row.name,
    phone: row.phone,
    email: row.email,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const contactList = listSource<Contact>('contacts', {
  id: 'id',
  name: 'name',
  phone: 'phone',
  email: 'email',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listContacts(db: Db, workspaceId: string, filter: ContactFilter, page: number, limit: number): Promise<PageText<Contact>> {
  const where: Condition[] = [['workspace_id = ?', workspaceId]];
  if (filter.phone) where.push(['phone = ?', filter.phone]);
  if (filter.email) where.push(['lower(email) = ?', filter.email.toLowerCase()]);
  if (filter.q) where.push(['(name ilike ? or phone ilike ? or email ilike ?)', `%${likeEscape(filter.q)}%`]);
  return listPage(db, contactList, where, { page, limit });
}

export async function getContact(db: Db, workspaceId: string, id: string): Promise<Contact | undefined> {
  const row = await db
    .selectFrom('contacts')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && contactRowToContact(row);
}

export async function findContactIdByPhone(db: Db, workspaceId: string, phone: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contacts')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('phone', '=', phone)
    .executeTakeFirst();
  return row?.id;
}

/** Inserts a contact; undefined when another contact of the workspace already has the phone. */
export async function insertContact(db: Db, workspaceId: string, input: ContactCreate): Promise<Contact | undefined> {
  const now = new Date();
  const row = await db
    .insertInto('contacts')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      name: input.name,
      phone: input.phone ?? null,
      email: input.email ?? null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['workspace_id', 'phone']).doNothing())
    .returningAll()
    .executeTakeFirst();
  return row && contactRowToContact(row);
}
