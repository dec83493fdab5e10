// Contacts of a workspace; a phone is unique within it.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { ContactRow } from './schema.js';
import { listPage, type Page } from './pagination.js';
import { sql } from 'kysely';

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

const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listContacts(db: Db, workspaceId: string, filter: ContactFilter, page: number, limit: number): Promise<Page<Contact>> {
  let base = db.selectFrom('contacts').where('workspace_id', '=', workspaceId);
  if (filter.phone) base = base.where('phone', '=', filter.phone);
  if (filter.email) base = base.where(sql`lower(email)`, '=', filter.email.toLowerCase());
  if (filter.q) {
    const pattern = `%${likeEscape(filter.q)}%`;
    base = base.where((eb) => eb.or([eb('name', 'ilike', pattern), eb('phone', 'ilike', pattern), eb('email', 'ilike', pattern)]));
  }
  return listPage(base, { page, limit }, contactRowToContact);
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
