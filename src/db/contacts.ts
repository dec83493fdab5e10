// Contacts of a workspace; a phone is unique within it. An erased contact keeps its row (its threads
// and messages refer to it) without any personal data, and exists for no read or change.
import { CompiledQuery, sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { Transaction, Updateable } from 'kysely';
import { runAtCommit } from './pg-driver.js';
import type { ContactAttributes, ContactRow, ContactTable, Database } from './schema.js';
import { hasLabels, labelKeys } from './labels.js';
import { listPage, listSource, type Condition, type PageText } from './pagination.js';
import { phoneForms, storedPhone } from '../phones.js';
import { normalizeText } from '../text.js';

export type Contact = components['schemas']['Contact'];
type ContactCreate = components['schemas']['ContactCreate'];

/** A contact's new values: labels already kept as they are stored (services/labels.ts), attributes whole. */
export interface ContactValues {
  name?: string;
  phone?: string | null;
  email?: string | null;
  externalId?: string | null;
  instagramId?: string;
  labels?: string[];
  attributes?: ContactAttributes;
}

export interface ContactFilter {
  q?: string | undefined;
  phone?: string | undefined;
  email?: string | undefined;
  instagramId?: string | undefined;
  whatsappUserId?: string | undefined;
  /** Case-insensitive. */
  whatsappUsername?: string | undefined;
  externalId?: string | undefined;
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
    whatsappUserId: row.whatsapp_user_id,
    whatsappUsername: row.whatsapp_username,
    externalId: row.external_id,
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
  whatsappUserId: 'whatsapp_user_id',
  whatsappUsername: 'whatsapp_username',
  externalId: 'external_id',
  labels: 'labels',
  attributes: 'attributes',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listContacts(db: Db, workspaceId: string, filter: ContactFilter, page: number, limit: number): Promise<PageText<Contact>> {
  const where: Condition[] = [['workspace_id = ? and erased_at is null', workspaceId]];
  // Either form of a Brazilian mobile: each form is one probe of contacts_phone_key.
  if (filter.phone) where.push(['phone = any (?::text[])', phoneForms(filter.phone)]);
  if (filter.email) where.push(['lower(email) = ?', filter.email.toLowerCase()]);
  if (filter.instagramId) where.push(['instagram_id = ?', filter.instagramId]);
  if (filter.whatsappUserId) where.push(['whatsapp_user_id = ?', filter.whatsappUserId]);
  // Its index holds only contacts with a username, lower-cased (migration 0035).
  if (filter.whatsappUsername) where.push(['lower(whatsapp_username) = ?', filter.whatsappUsername.toLowerCase()]);
  if (filter.externalId) where.push(['external_id = ?', filter.externalId]);
  if (filter.labels?.length) where.push(hasLabels(workspaceId, filter.labels));
  // In NFC, as names are kept: a name typed decomposed finds its composed twin.
  if (filter.q) where.push(['(name ilike ? or phone ilike ? or email ilike ?)', `%${likeEscape(normalizeText(filter.q))}%`]);
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

/**
 * The contact holding `phone` in any of its forms (a Brazilian mobile with or without its ninth
 * digit); the one holding the stored form first, when contacts from before hold both.
 */
export async function findContactIdByPhone(db: Db, workspaceId: string, phone: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contacts')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('phone', 'in', phoneForms(phone))
    .orderBy(sql`phone = ${storedPhone(phone)}`, 'desc')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

export async function findContactIdByExternalId(db: Db, workspaceId: string, externalId: string): Promise<string | undefined> {
  const row = await db.selectFrom('contacts').select('id').where('workspace_id', '=', workspaceId).where('external_id', '=', externalId).executeTakeFirst();
  return row?.id;
}

/** Where a merged contact went: the live contact it was merged into (following merges of merges), or undefined. */
export async function mergedInto(db: Db, workspaceId: string, id: string): Promise<string | undefined> {
  const result = await sql<{ id: string }>`
    with recursive chain (id, merged_into, depth) as (
      select id, merged_into, 0 from contacts where workspace_id = ${workspaceId} and id = ${id} and merged_into is not null
      union all
      select c.id, c.merged_into, chain.depth + 1
        from chain join contacts c on c.workspace_id = ${workspaceId} and c.id = chain.merged_into
       where chain.depth < 50
    )
    select id from chain where merged_into is null order by depth desc limit 1`.execute(db);
  return result.rows[0]?.id;
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
      phone: input.phone ? storedPhone(input.phone) : null,
      email: input.email ?? null,
      instagram_id: input.instagramId ?? null,
      external_id: input.externalId ?? null,
      whatsapp_user_id: (input as { whatsappUserId?: string }).whatsappUserId ?? null,
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

/**
 * The live (unerased) contact's row, locked until the transaction ends: a change is planned from it
 * (FOR UPDATE). With `keyShare`, only held against a merge or an erasure (FOR KEY SHARE, as a
 * reference to the contact takes): changes of its other columns, as an automation's, pass.
 */
export async function lockContact(trx: Db, workspaceId: string, id: string, { keyShare = false } = {}): Promise<ContactRow | undefined> {
  const query = trx.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).where('erased_at', 'is', null);
  return (keyShare ? query.forKeyShare() : query.forUpdate()).executeTakeFirst();
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
      ...(values.phone !== undefined && { phone: values.phone && storedPhone(values.phone) }),
      ...(values.email !== undefined && { email: values.email }),
      ...(values.externalId !== undefined && { external_id: values.externalId }),
      ...(values.instagramId !== undefined && { instagram_id: values.instagramId }),
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

/** What an erased or merged contact keeps of the person: nothing (its row stays for its threads and messages). */
const noPerson = () => ({
  name: '',
  phone: null,
  email: null,
  instagram_id: null,
  whatsapp_user_id: null,
  whatsapp_username: null,
  external_id: null,
  labels: [] as string[],
  label_keys: [] as string[],
  attributes: '{}',
});

/**
 * Erases a contact: its name, phone, email, labels and attributes go, and the content of its messages; its threads,
 * their history and NPS answers stay (they hold no personal data), so every statistic is unchanged.
 * Its events are the caller's to scrub (services/contacts.ts eraseContact).
 * False when there is no such (unerased) contact. Run it in a transaction.
 */
export async function eraseContact(trx: Db, workspaceId: string, id: string, now: Date): Promise<boolean> {
  const erased = await trx
    .updateTable('contacts')
    .set({
      ...noPerson(),
      erased_at: now,
      updated_at: now,
    })
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

/**
 * Holds the keys (a phone in its stored form, an external id, a BSUID...) of the workspace until the
 * transaction ends: whoever looks a key up and then writes it holds it first, so two writers of one
 * key (two upserts, an upsert and a customer's first message, a POST and a PATCH) go one after the other.
 * Keys are taken in one order, so two holders of several never wait on each other in a circle.
 * `withNext`: the statement travels with the transaction's next one (runAtCommit holds it back
 * until then), so holding the keys costs no round trip of its own; PostgreSQL still runs it first,
 * and the next statement reads what the holders before it committed.
 */
export async function lockContactKeys(trx: Db, workspaceId: string, keys: readonly string[], { withNext = false } = {}): Promise<void> {
  if (keys.length === 0) return;
  const sorted = [...new Set(keys)].sort();
  const query = sql`
    select count(pg_advisory_xact_lock(hashtextextended(s.k, 0)))
      from (select ${`contact-key:${workspaceId}:`} || u.k as k from unnest(${sorted}::text[]) with ordinality as u(k, n) order by u.n) s`;
  if (withNext && trx.isTransaction) await runAtCommit(trx as Transaction<Database>, query);
  else await query.execute(trx);
}

/** The keys a contact is found by, each optional. */
export interface ContactKeys {
  externalId?: string | undefined;
  whatsappUserId?: string | undefined;
  instagramId?: string | undefined;
  phone?: string | undefined;
  email?: string | undefined;
}
export type ContactKeyName = keyof ContactKeys;
export const CONTACT_KEY_NAMES: readonly ContactKeyName[] = ['externalId', 'whatsappUserId', 'instagramId', 'phone', 'email'];

/** The advisory keys of `keys` (lockContactKeys): a phone by its stored form, an e-mail in lower case. */
export function contactKeyLocks(keys: ContactKeys): string[] {
  const locks: string[] = [];
  if (keys.externalId !== undefined) locks.push(`external:${keys.externalId}`);
  if (keys.whatsappUserId !== undefined) locks.push(`bsuid:${keys.whatsappUserId}`);
  if (keys.instagramId !== undefined) locks.push(`instagram:${keys.instagramId}`);
  if (keys.phone !== undefined) locks.push(`phone:${storedPhone(keys.phone)}`);
  if (keys.email !== undefined) locks.push(`email:${keys.email.toLowerCase()}`);
  return locks;
}

/**
 * Each key given and the contacts it finds (a phone in either Brazilian form, an e-mail ignoring
 * case), in one query: one indexed lookup per key (a UNION ALL, not an OR the planner may scan the table for).
 */
export async function findContactsByKeys(db: Db, workspaceId: string, keys: ContactKeys): Promise<Array<{ key: ContactKeyName; id: string }>> {
  // An erased or merged contact holds no key, so none is filtered out here: `erased_at is null` would
  // let the planner take the partial list index and filter every contact of the workspace by the key.
  const live = sql`workspace_id = ${workspaceId}`;
  const lookups = [
    keys.externalId !== undefined && sql`select 'externalId' as key, id from contacts where ${live} and external_id = ${keys.externalId}`,
    keys.whatsappUserId !== undefined && sql`select 'whatsappUserId' as key, id from contacts where ${live} and whatsapp_user_id = ${keys.whatsappUserId}`,
    keys.instagramId !== undefined && sql`select 'instagramId' as key, id from contacts where ${live} and instagram_id = ${keys.instagramId}`,
    keys.phone !== undefined && sql`select 'phone' as key, id from contacts where ${live} and phone = any (${phoneForms(keys.phone)}::text[])`,
    keys.email !== undefined && sql`select 'email' as key, id from contacts where ${live} and lower(email) = ${keys.email.toLowerCase()}`,
  ].filter((lookup) => lookup !== false);
  if (lookups.length === 0) return [];
  const result = await sql<{ key: ContactKeyName; id: string }>`${sql.join(lookups, sql` union all `)} order by id`.execute(db);
  return result.rows;
}

/** Contacts of `ids` in the workspace, erased and merged ones too, locked until the transaction ends, taken in id order. */
export async function lockContactsForMerge(trx: Db, workspaceId: string, ids: readonly string[]): Promise<ContactRow[]> {
  return trx.selectFrom('contacts').selectAll().where('workspace_id', '=', workspaceId).where('id', 'in', ids).orderBy('id').forUpdate().execute();
}

/** Fixed text (prepared once per connection, compiled never): every new WhatsApp customer's first message runs it. */
const INSERT_WHATSAPP_CONTACT = `
    insert into contacts (workspace_id, id, name, phone, email, whatsapp_user_id, whatsapp_username, created_at, updated_at)
    values ($1, $2, $3, $4, null, $5, $6, $7, $7)
    returning *`;

/** A new contact from a customer's WhatsApp message: their phone (stored form), BSUID and username, as given. */
export async function insertWhatsappContact(
  trx: Db,
  workspaceId: string,
  sender: { phone?: string | undefined; whatsappUserId?: string | undefined; username?: string | null | undefined },
  name: string,
  now: Date,
): Promise<ContactRow> {
  const { rows } = await trx.executeQuery<ContactRow>(
    CompiledQuery.raw(INSERT_WHATSAPP_CONTACT, [
      workspaceId,
      uuidv7(),
      name,
      sender.phone ? storedPhone(sender.phone) : null,
      sender.whatsappUserId ?? null,
      sender.username ?? null,
      now,
    ]),
  );
  if (!rows[0]) throw new Error('the contact was not inserted');
  return rows[0];
}

/** Writes what a WhatsApp delivery tells of a contact (its BSUID, phone, username); the row after. */
export async function writeWhatsappIdentity(
  trx: Db,
  workspaceId: string,
  id: string,
  values: { phone?: string; whatsappUserId?: string; username?: string | null },
  now: Date,
): Promise<ContactRow> {
  return trx
    .updateTable('contacts')
    .set({
      ...(values.phone !== undefined && { phone: storedPhone(values.phone) }),
      ...(values.whatsappUserId !== undefined && { whatsapp_user_id: values.whatsappUserId }),
      ...(values.username !== undefined && { whatsapp_username: values.username }),
      updated_at: now,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The open threads of `contactIds`, newest first: which of them a merge keeps open (one per channel). */
export async function openThreadsOfContacts(trx: Db, workspaceId: string, contactIds: string[]) {
  return trx
    .selectFrom('threads')
    .select(['id', 'channel_id', 'created_at'])
    .where('workspace_id', '=', workspaceId)
    .where('contact_id', 'in', contactIds)
    .where('status', '=', 'open')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

/** How many threads and messages `contactIds` hold: what a merge of them would move. */
export async function countContactsRows(trx: Db, workspaceId: string, contactIds: string[]): Promise<{ threads: number; messages: number }> {
  const { rows } = await sql<{ threads: string; messages: string }>`
    select (select count(*) from threads where workspace_id = ${workspaceId} and contact_id = any (${contactIds}::uuid[])) as threads,
           (select count(*) from messages m
             where m.workspace_id = ${workspaceId}
               and m.thread_id in (select t.id from threads t where t.workspace_id = ${workspaceId} and t.contact_id = any (${contactIds}::uuid[]))
               and m.contact_id = any (${contactIds}::uuid[])) as messages`.execute(trx);
  return { threads: Number(rows[0]!.threads), messages: Number(rows[0]!.messages) };
}

/**
 * Folds `sourceIds` into `targetId`, in the caller's transaction (the contacts locked): the sources
 * let go of their keys first (they are unique) and keep nothing of the person, as an erased contact
 * (their rows stay: their ids answer contact_merged); the target takes `values`; the sources'
 * messages (through their threads: the messages' index), threads and files move to the target.
 */
export async function foldContacts(
  trx: Db,
  workspaceId: string,
  targetId: string,
  sourceIds: string[],
  { values, now }: { values: Updateable<ContactTable>; now: Date },
): Promise<ContactRow> {
  await trx
    .updateTable('contacts')
    .set({
      ...noPerson(),
      merged_into: targetId,
      erased_at: now,
      updated_at: now,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', sourceIds)
    .execute();
  const row = await trx
    .updateTable('contacts')
    .set({ ...values, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', targetId)
    .returningAll()
    .executeTakeFirstOrThrow();
  await sql`
    update messages set contact_id = ${targetId}
     where workspace_id = ${workspaceId}
       and thread_id in (select t.id from threads t where t.workspace_id = ${workspaceId} and t.contact_id = any (${sourceIds}::uuid[]))
       and contact_id = any (${sourceIds}::uuid[])`.execute(trx);
  await sql`update threads set contact_id = ${targetId} where workspace_id = ${workspaceId} and contact_id = any (${sourceIds}::uuid[])`.execute(trx);
  await sql`update media set contact_id = ${targetId} where workspace_id = ${workspaceId} and contact_id = any (${sourceIds}::uuid[])`.execute(trx);
  return row;
}
