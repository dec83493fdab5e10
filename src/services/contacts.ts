// Creating, changing and erasing contacts with their events: contact.created and contact.updated are
// recorded here only, in the transaction of the change, whether an API key created the contact or a
// customer wrote first. A change that changes nothing records nothing.
import type { components } from '../../generated/api.js';
import { SYSTEM, type Actor } from '../actor.js';
import {
  contactKeyLocks,
  contactRowToContact,
  eraseContact as eraseContactRecords,
  findContactIdByExternalId,
  findContactIdByKey,
  findContactIdByPhone,
  findContactsByKeys,
  foldContacts,
  countContactsRows,
  openThreadsOfContacts,
  insertContact,
  insertContactByKey,
  insertWhatsappContact,
  lockContact,
  lockContactKeys,
  lockContactsForMerge,
  mergedInto,
  updateContact as writeContact,
  writeWhatsappIdentity,
  CONTACT_KEY_NAMES,
  type Contact,
  type ContactKey,
  type ContactKeys,
  type ContactValues,
} from '../db/contacts.js';
import type { ContactAttributes, ContactRow } from '../db/schema.js';
import type { Db } from '../db/database.js';
import { labelKeys } from '../db/labels.js';
import { readThreadForChange, writeThreadChange } from '../db/threads.js';
import { ApiError } from '../errors.js';
import { moveContactEvents, recordEvent, scrubContactEvents } from '../events/record.js';
import { eraseContactMedia } from '../media/erase.js';
import { storedPhone } from '../phones.js';
import { MAX_ATTRIBUTES, MAX_LABELS, mergeAttributes, normalizeLabels, sameAttributes, sameLabels } from './labels.js';
import { planThreadChange, threadUpdated } from './threads.js';
import { clippedName, CONTACT_NAME_MAX, normalizedName } from '../text.js';

type ContactCreate = components['schemas']['ContactCreate'];
type ContactUpdate = components['schemas']['ContactUpdate'];
type ContactUpsert = components['schemas']['ContactUpsert'];
type MergePreview = components['schemas']['ContactMergePreview'];

/** 409 `conflict`: `value` of `field` is another contact's. */
function keyTaken(field: 'phone' | 'externalId' | 'instagramId', holder: string): ApiError {
  const what = field === 'phone' ? 'phone' : field === 'externalId' ? 'external id' : 'Instagram id';
  return new ApiError(409, 'conflict', `A contact with this ${what} already exists.`, [
    { path: `/body/${field}`, message: `already used by contact ${holder}`, existingId: holder },
  ]);
}

/**
 * Holds the phone and external id `values` give `id` (undefined: a new contact) and throws the 409 when
 * another contact has them: a Brazilian mobile in either form. Run it in the write's transaction.
 */
async function claimKeys(
  trx: Db,
  workspaceId: string,
  id: string | undefined,
  values: { phone?: string | null | undefined; externalId?: string | null | undefined },
): Promise<void> {
  const phone = values.phone ?? undefined;
  const externalId = values.externalId ?? undefined;
  if (phone === undefined && externalId === undefined) return;
  await lockContactKeys(trx, workspaceId, contactKeyLocks({ phone, externalId }));
  const phoneHolder = phone === undefined ? undefined : await findContactIdByPhone(trx, workspaceId, phone);
  if (phoneHolder && phoneHolder !== id) throw keyTaken('phone', phoneHolder);
  const externalHolder = externalId === undefined ? undefined : await findContactIdByExternalId(trx, workspaceId, externalId);
  if (externalHolder && externalHolder !== id) throw keyTaken('externalId', externalHolder);
}

/** The one emitter of contact.updated: a change by a key or an automation, an upsert, or what a WhatsApp delivery tells. */
async function contactUpdated(trx: Db, workspaceId: string, contact: Contact, actor: Actor, now: Date): Promise<void> {
  await recordEvent(trx, workspaceId, 'contact.updated', contact, actor, now);
}

/** The one emitter of contact.created; `withNext`: its statement travels with the transaction's next one (recordEvent). */
async function contactCreated(trx: Db, workspaceId: string, contact: Contact, actor: Actor, now: Date, withNext = false): Promise<void> {
  await recordEvent(trx, workspaceId, 'contact.created', contact, actor, now, { withNext });
}

/**
 * Creates a contact with its event; a 409 when another contact has its phone (either form of a
 * Brazilian mobile) or external id; undefined when another has its Instagram id. Run it in a transaction.
 */
export async function createContact(trx: Db, workspaceId: string, input: ContactCreate, actor: Actor): Promise<Contact | undefined> {
  await claimKeys(trx, workspaceId, undefined, input);
  const now = new Date();
  const contact = await insertContact(
    trx,
    workspaceId,
    { ...input, name: normalizedName(input.name, CONTACT_NAME_MAX), ...(input.labels && { labels: normalizeLabels(input.labels) }) },
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
  const name = patch.name === undefined ? undefined : normalizedName(patch.name, CONTACT_NAME_MAX);
  if (name !== undefined && name !== row.name) values.name = name;
  const phone = patch.phone === undefined || patch.phone === null ? patch.phone : storedPhone(patch.phone);
  if (phone !== undefined && phone !== row.phone) values.phone = phone;
  if (patch.email !== undefined && patch.email !== row.email) values.email = patch.email;
  if (patch.externalId !== undefined && patch.externalId !== row.external_id) values.externalId = patch.externalId;
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
  await claimKeys(trx, workspaceId, id, values);
  const now = new Date();
  const contact = await writeContact(trx, workspaceId, id, values, now);
  if (contact) await contactUpdated(trx, workspaceId, contact, actor, now);
  return contact;
}

/**
 * The contact known by `key`, or a new one named `name` (in NFC) with its event: run it in a transaction.
 * Concurrent callers end with the same contact (the unique index decides, the loser reads the winner's).
 */
export async function findOrCreateContact(trx: Db, workspaceId: string, key: ContactKey, name: string, now: Date, actor: Actor): Promise<string> {
  const found = await findContactIdByKey(trx, workspaceId, key);
  if (found) return found;
  const inserted = await insertContactByKey(trx, workspaceId, key, clippedName(name, CONTACT_NAME_MAX), now);
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

/** The keys an upsert gives. */
function upsertKeys(input: ContactUpsert): ContactKeys {
  const keys: ContactKeys = {};
  for (const name of CONTACT_KEY_NAMES) if (input[name] !== undefined) keys[name] = input[name];
  return keys;
}

/** Attributes of a new contact: an upsert's `null` (remove) has nothing to remove. */
const withoutNulls = (attributes: Record<string, unknown> | undefined): ContactAttributes | undefined =>
  attributes && (Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== null)) as ContactAttributes);

/**
 * `POST /contacts/upsert`: the contact every given key finds, updated as PATCH would (its event when
 * something changed), or a new one when none finds any (`name` required then). Keys finding two
 * contacts are a 409; no key a 400. The keys are held first (lockContactKeys), so concurrent upserts
 * of one key end with one contact. Run it in a transaction.
 */
export async function upsertContact(trx: Db, workspaceId: string, input: ContactUpsert, actor: Actor): Promise<{ contact: Contact; created: boolean }> {
  const keys = upsertKeys(input);
  if (Object.keys(keys).length === 0) {
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: '/body', message: `must have at least one of ${CONTACT_KEY_NAMES.join(', ')}` },
    ]);
  }
  await lockContactKeys(trx, workspaceId, contactKeyLocks(keys));
  const found = await findContactsByKeys(trx, workspaceId, keys);
  const ids = [...new Set(found.map((f) => f.id))];
  if (ids.length > 1) {
    throw new ApiError(
      409,
      'conflict',
      'The keys find different contacts; merge them first (POST /contacts/{id}/merge).',
      found.map((f) => ({ path: `/body/${f.key}`, message: `finds contact ${f.id}`, existingId: f.id })),
    );
  }
  const now = new Date();
  if (ids.length === 0) {
    if (input.name === undefined) {
      throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
        { path: '/body/name', message: 'is required when no key finds a contact' },
      ]);
    }
    const { whatsappUserId, attributes, ...fields } = input;
    const create = {
      ...fields,
      name: normalizedName(input.name, CONTACT_NAME_MAX),
      ...(input.labels && { labels: normalizeLabels(input.labels) }),
      attributes: withoutNulls(attributes),
    };
    const contact = await insertContact(trx, workspaceId, { ...create, ...(whatsappUserId !== undefined && { whatsappUserId }) }, now);
    if (!contact) throw new Error('a contact of keys held and found by none could not be inserted');
    await contactCreated(trx, workspaceId, contact, actor, now);
    return { contact, created: true };
  }
  const row = await lockContact(trx, workspaceId, ids[0]!);
  if (!row) throw new Error('the contact the keys found is gone');
  const values = planContactChange(row, {
    name: input.name,
    phone: input.phone,
    email: input.email,
    externalId: input.externalId,
    labels: input.labels,
    attributes: input.attributes,
  });
  // A key that found nothing is free (it is held): the contact takes it, as it takes a new phone.
  if (input.instagramId !== undefined && input.instagramId !== row.instagram_id) values.instagramId = input.instagramId;
  if (Object.keys(values).length === 0) return { contact: contactRowToContact(row), created: false };
  const contact = await writeContact(trx, workspaceId, row.id, values, now);
  if (!contact) throw new Error('the locked contact is gone');
  await contactUpdated(trx, workspaceId, contact, actor, now);
  return { contact, created: false };
}

/** 404 for a contact the workspace does not have as a live one: `contact_merged` naming where a merged one went. */
export async function contactGone(db: Db, workspaceId: string, id: string, path?: string): Promise<ApiError> {
  const target = await mergedInto(db, workspaceId, id);
  if (target) {
    return new ApiError(404, 'contact_merged', `Contact ${id} was merged into contact ${target}.`, [
      { path: path ?? '/path/id', message: `merged into contact ${target}`, existingId: target },
    ]);
  }
  return new ApiError(404, 'not_found', 'Contact not found.', path ? [{ path, message: `no contact ${id} in this workspace` }] : undefined);
}

const FILLED_FIELDS = ['phone', 'email', 'instagram_id', 'whatsapp_user_id', 'whatsapp_username', 'external_id'] as const;

/**
 * `POST /contacts/{id}/merge`: folds `sourceIds` into `targetId` in the caller's transaction. Every
 * contact involved is locked first, in id order (two merges over the same contacts go one after
 * the other; a customer's message for a source waits, then finds the target: findOrCreateInboundContact).
 * The target keeps its fields and takes a source's where its own is null; labels are united,
 * attributes merged (the target's win, then the earlier source's); threads, messages, files and
 * events move; where two open threads share a channel, the older is closed. `dryRun` answers what
 * would happen and writes nothing.
 */
export async function mergeContacts(
  trx: Db,
  workspaceId: string,
  targetId: string,
  sourceIds: readonly string[],
  dryRun: boolean,
  actor: Actor,
): Promise<Contact | MergePreview> {
  // UUIDs in any case name one contact.
  targetId = targetId.toLowerCase();
  sourceIds = sourceIds.map((id) => id.toLowerCase());
  const self = sourceIds.indexOf(targetId);
  if (self >= 0) {
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: `/body/sourceIds/${self}`, message: 'is the target itself' },
    ]);
  }
  const rows = new Map((await lockContactsForMerge(trx, workspaceId, [targetId, ...sourceIds])).map((r) => [r.id, r]));
  const live = async (id: string, path?: string): Promise<ContactRow> => {
    const row = rows.get(id);
    if (!row || row.erased_at) throw await contactGone(trx, workspaceId, id, path);
    return row;
  };
  const target = await live(targetId);
  const sources: ContactRow[] = [];
  for (const [i, id] of sourceIds.entries()) sources.push(await live(id, `/body/sourceIds/${i}`));

  const merged = Object.fromEntries(FILLED_FIELDS.map((field) => [field, target[field] ?? sources.find((s) => s[field] !== null)?.[field] ?? null])) as Record<
    (typeof FILLED_FIELDS)[number],
    string | null
  >;
  const labels = normalizeLabels([target, ...sources].flatMap((c) => c.labels));
  if (labels.length > MAX_LABELS) {
    throw new ApiError(422, 'limit_reached', `The merged contact would have ${labels.length} labels; at most ${MAX_LABELS}.`, [
      { path: '/body/sourceIds', message: `the labels united number ${labels.length} (at most ${MAX_LABELS})` },
    ]);
  }
  const attributes = Object.assign({}, ...[...sources].reverse().map((s) => s.attributes), target.attributes) as ContactAttributes;
  if (Object.keys(attributes).length > MAX_ATTRIBUTES) {
    throw new ApiError(422, 'limit_reached', `The merged contact would have ${Object.keys(attributes).length} attributes; at most ${MAX_ATTRIBUTES}.`, [
      { path: '/body/sourceIds', message: `the attributes merged number ${Object.keys(attributes).length} (at most ${MAX_ATTRIBUTES})` },
    ]);
  }
  const ids = sourceIds as string[];
  // Open threads of the target and the sources sharing a channel: the newest stays open.
  const open = await openThreadsOfContacts(trx, workspaceId, [targetId, ...ids]);
  const kept = new Set<string>();
  const closing: string[] = [];
  for (const thread of open) {
    if (kept.has(thread.channel_id)) closing.push(thread.id);
    else kept.add(thread.channel_id);
  }
  const now = new Date();
  if (dryRun) {
    const counts = await countContactsRows(trx, workspaceId, ids);
    const preview = { ...target, ...merged, labels, attributes, updated_at: now };
    return { contact: contactRowToContact(preview), movedThreads: counts.threads, movedMessages: counts.messages, closedThreadIds: closing };
  }
  for (const threadId of closing) {
    const read = await readThreadForChange(trx, workspaceId, threadId, { lock: true });
    if (!read) continue;
    const { set, changes } = planThreadChange(read.row, { status: 'closed' }, now);
    const row = await writeThreadChange(trx, workspaceId, read, set, changes, { actor, reason: 'contacts merged' }, now);
    if (row) await threadUpdated(trx, workspaceId, row, actor, now);
  }
  // The sources let go of their keys first (they are unique), then the target takes them; their
  // messages, threads and files move to it, and so do their events.
  const row = await foldContacts(trx, workspaceId, targetId, ids, {
    values: { ...merged, labels, label_keys: labelKeys(workspaceId, labels), attributes: JSON.stringify(attributes) },
    now,
  });
  await moveContactEvents(trx, workspaceId, ids, targetId);
  const contact = contactRowToContact(row);
  await recordEvent(trx, workspaceId, 'contact.merged', contact, actor, now, { mergedIds: ids });
  return contact;
}

/** Who wrote on a channel, as Meta's delivery names them. */
export type InboundSender =
  | { whatsappUserId?: string | undefined; phone?: string | undefined; username?: string | null | undefined; name?: string | undefined }
  | { instagramId: string; name?: string | undefined };

const MAX_FOLLOWS = 5;

/** The first lookup of a WhatsApp sender, made by the caller with the sender's keys held (findOrCreateInboundContact). */
export interface SenderSeen {
  /** The contact holding the BSUID, the one holding the phone in any form (its stored form first). */
  byBsuid: string | null;
  byPhone: string | null;
  /** byBsuid, else byPhone, held FOR KEY SHARE (lockContact); null when none or gone meanwhile. */
  contact: Pick<ContactRow, 'id' | 'phone' | 'whatsapp_user_id' | 'whatsapp_username'> | null;
}

/**
 * The contact a customer's message belongs to, locked until the transaction ends; created with its
 * event when there is none. WhatsApp: found by BSUID, then by phone (either form of a Brazilian
 * mobile); a delivery that brings both stores both on it in place of those it held (a phone another
 * contact holds stays there), and its username. Created in the phone's 13-digit form, named after
 * the profile name, else the username, else the phone (that form) or BSUID. The keys are held first, so concurrent messages of
 * one new customer make one contact; the row's key-share lock makes a merge of it wait for this
 * message, or this message wait for the merge and then find the target. Run it in the receive's transaction.
 * `seen`: the caller held the sender's keys and made the first lookup itself (services/receive.ts,
 * in the statement that also reads the message's thread: db/messages.ts inboundContext).
 */
export async function findOrCreateInboundContact(trx: Db, workspaceId: string, sender: InboundSender, now: Date, seen?: SenderSeen): Promise<string> {
  if ('instagramId' in sender) {
    return findOrCreateContact(trx, workspaceId, { instagramId: sender.instagramId }, sender.name ?? `Instagram ${sender.instagramId}`, now, SYSTEM);
  }
  const { whatsappUserId, phone, username } = sender;
  if (!whatsappUserId && !phone) throw new Error('a WhatsApp sender without a phone or a BSUID');
  if (!seen) await lockContactKeys(trx, workspaceId, contactKeyLocks({ whatsappUserId, phone }));
  for (let attempt = 0; attempt < MAX_FOLLOWS; attempt++) {
    const first = attempt === 0 ? seen : undefined;
    let byBsuid: string | undefined;
    let byPhone: string | undefined;
    let id: string | undefined;
    if (first) {
      byBsuid = first.byBsuid ?? undefined;
      byPhone = first.byPhone ?? undefined;
      id = byBsuid ?? byPhone;
    } else {
      const found = await findContactsByKeys(trx, workspaceId, { whatsappUserId, phone });
      byBsuid = found.find((f) => f.key === 'whatsappUserId')?.id;
      byPhone = found.find((f) => f.key === 'phone')?.id;
      id = byBsuid ?? (phone ? await findContactIdByPhone(trx, workspaceId, phone) : undefined);
    }
    if (!id) {
      // Named after the phone as it is stored (a Brazilian mobile's 13-digit form), as its `phone` reads.
      const name = clippedName(sender.name ?? username ?? (phone && storedPhone(phone)) ?? whatsappUserId!, CONTACT_NAME_MAX);
      const row = await insertWhatsappContact(trx, workspaceId, { phone, whatsappUserId, username }, name, now);
      // The message's statements follow in this transaction: its event goes with the next of them.
      await contactCreated(trx, workspaceId, contactRowToContact(row), SYSTEM, now, true);
      return row.id;
    }
    // Merged (or erased) since it was found: the keys now lead to the contact it became. Held as a
    // reference is (a merge or an erasure waits for this message); the sender's keys, held above,
    // already keep two messages of one customer apart.
    const row = first ? first.contact : await lockContact(trx, workspaceId, id, { keyShare: true });
    if (!row) continue;
    // The delivery's phone and BSUID replace what the contact held: the BSUID is no one else's (it
    // would have found them first); a phone another contact holds (in either form) stays there.
    const values: { phone?: string; whatsappUserId?: string; username?: string | null } = {};
    if (whatsappUserId && whatsappUserId !== row.whatsapp_user_id && (!byBsuid || byBsuid === row.id)) values.whatsappUserId = whatsappUserId;
    if (phone && storedPhone(phone) !== row.phone && (!byPhone || byPhone === row.id)) values.phone = phone;
    // Refreshed from each delivery: a profile showing no username clears the one shown before.
    if (username !== undefined && username !== row.whatsapp_username) values.username = username;
    if (Object.keys(values).length > 0) {
      const written = await writeWhatsappIdentity(trx, workspaceId, row.id, values, now);
      await contactUpdated(trx, workspaceId, contactRowToContact(written), SYSTEM, now);
    }
    return row.id;
  }
  throw new Error(`the contact of a WhatsApp sender kept moving under ${MAX_FOLLOWS} lookups`);
}

/**
 * Meta's `user_changed_user_id`: the contact known by `previous` is known by `current` from now on
 * (left as it is when another contact already has `current`, or none has `previous`). Run it in the receive's transaction.
 */
export async function changeWhatsappUserId(trx: Db, workspaceId: string, previous: string, current: string, now: Date): Promise<void> {
  await lockContactKeys(trx, workspaceId, contactKeyLocks({ whatsappUserId: previous }).concat(contactKeyLocks({ whatsappUserId: current })));
  const found = await findContactsByKeys(trx, workspaceId, { whatsappUserId: previous });
  const holder = await findContactsByKeys(trx, workspaceId, { whatsappUserId: current });
  if (found.length === 0 || holder.length > 0) return;
  const row = await lockContact(trx, workspaceId, found[0]!.id);
  if (!row) return;
  const written = await writeWhatsappIdentity(trx, workspaceId, row.id, { whatsappUserId: current }, now);
  await contactUpdated(trx, workspaceId, contactRowToContact(written), SYSTEM, now);
}
