// Handlers of the Contacts operations: erasure, upsert and merge included.
import * as contacts from '../db/contacts.js';
import { transact } from '../db/database.js';
import { ApiError } from '../errors.js';
import { apiKeyActor } from '../actor.js';
import { contactGone, createContact, eraseContact, mergeContacts, updateContact, upsertContact } from '../services/contacts.js';
import { paging, type Handlers } from './handler.js';

/** PostgreSQL's deadlock (40P01) or serialization failure (40001): the transaction is worth running again. */
const isRetryable = (err: unknown): boolean => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return code === '40P01' || code === '40001';
};

export const contactHandlers: Pick<
  Handlers,
  'listContacts' | 'getContact' | 'createContact' | 'updateContact' | 'deleteContact' | 'upsertContact' | 'mergeContact'
> = {
  async listContacts({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = {
      q: query.q,
      phone: query.phone,
      email: query.email,
      instagramId: query.instagramId,
      whatsappUserId: query.whatsappUserId,
      whatsappUsername: query.whatsappUsername,
      externalId: query.externalId,
      labels: query.label,
    };
    return { status: 200, body: await contacts.listContacts(db, auth.workspaceId, filter, page, limit) };
  },

  async getContact({ db, auth, params }) {
    const contact = await contacts.getContact(db, auth.workspaceId, params.id);
    if (!contact) throw await contactGone(db, auth.workspaceId, params.id);
    return { status: 200, body: contact };
  },

  async createContact({ db, auth, body }) {
    const contact = await transact(db, (trx) => createContact(trx, auth.workspaceId, body, apiKeyActor(auth.keyId)));
    if (contact) return { status: 201, body: contact };
    // Phone and external id were claimed before the insert: the Instagram id is the one taken.
    const holder = body.instagramId && (await contacts.findContactIdByInstagramId(db, auth.workspaceId, body.instagramId));
    throw new ApiError(409, 'conflict', 'A contact with this Instagram id already exists.', [
      { path: '/body/instagramId', message: `already used by contact ${holder}`, ...(holder && { existingId: holder }) },
    ]);
  },

  async updateContact({ db, auth, params, body }) {
    const contact = await transact(db, (trx) => updateContact(trx, auth.workspaceId, params.id, body, apiKeyActor(auth.keyId)));
    if (!contact) throw await contactGone(db, auth.workspaceId, params.id);
    return { status: 200, body: contact };
  },

  async deleteContact({ db, auth, params }) {
    const erased = await transact(db, (trx) => eraseContact(trx, auth.workspaceId, params.id, new Date()));
    if (!erased) throw await contactGone(db, auth.workspaceId, params.id);
    return { status: 204 };
  },

  async upsertContact({ db, auth, body }) {
    const { contact, created } = await transact(db, (trx) => upsertContact(trx, auth.workspaceId, body, apiKeyActor(auth.keyId)));
    return created ? { status: 201, body: contact } : { status: 200, body: contact };
  },

  async mergeContact({ db, auth, params, body }) {
    // A merge locks its contacts in one order, but a customer's message may hold one of them and wait on another: PostgreSQL breaks such a wait, and the merge runs again.
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await transact(db, (trx) =>
          mergeContacts(trx, auth.workspaceId, params.id, body.sourceIds, body.dryRun ?? false, apiKeyActor(auth.keyId)),
        );
        return { status: 200, body: result };
      } catch (err) {
        if (attempt >= 5 || !isRetryable(err)) throw err;
      }
    }
  },
};
