// Handlers of the Contacts operations, erasure included.
import * as contacts from '../db/contacts.js';
import { transact } from '../db/database.js';
import { ApiError, isConstraintError, notFound } from '../errors.js';
import { apiKeyActor } from '../actor.js';
import { createContact, eraseContact, updateContact } from '../services/contacts.js';
import { paging, type Handlers } from './handler.js';

async function phoneConflict(db: Parameters<typeof contacts.findContactIdByPhone>[0], workspaceId: string, phone: string): Promise<ApiError> {
  const existingId = await contacts.findContactIdByPhone(db, workspaceId, phone);
  return new ApiError(409, 'conflict', 'A contact with this phone already exists.', [
    { path: '/body/phone', message: `already used by contact ${existingId}`, ...(existingId && { existingId }) },
  ]);
}

export const contactHandlers: Pick<Handlers, 'listContacts' | 'getContact' | 'createContact' | 'updateContact' | 'deleteContact'> = {
  async listContacts({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = { q: query.q, phone: query.phone, email: query.email, instagramId: query.instagramId, labels: query.label };
    return { status: 200, body: await contacts.listContacts(db, auth.workspaceId, filter, page, limit) };
  },

  async getContact({ db, auth, params }) {
    const contact = await contacts.getContact(db, auth.workspaceId, params.id);
    if (!contact) throw notFound('Contact');
    return { status: 200, body: contact };
  },

  async createContact({ db, auth, body }) {
    const contact = await transact(db, (trx) => createContact(trx, auth.workspaceId, body, apiKeyActor(auth.keyId)));
    if (contact) return { status: 201, body: contact };
    const phoneHolder = body.phone && (await contacts.findContactIdByPhone(db, auth.workspaceId, body.phone));
    if (phoneHolder || !body.instagramId) throw await phoneConflict(db, auth.workspaceId, body.phone!);
    const holder = await contacts.findContactIdByInstagramId(db, auth.workspaceId, body.instagramId);
    throw new ApiError(409, 'conflict', 'A contact with this Instagram id already exists.', [
      { path: '/body/instagramId', message: `already used by contact ${holder}`, ...(holder && { existingId: holder }) },
    ]);
  },

  async updateContact({ db, auth, params, body }) {
    try {
      const contact = await transact(db, (trx) => updateContact(trx, auth.workspaceId, params.id, body, apiKeyActor(auth.keyId)));
      if (!contact) throw notFound('Contact');
      return { status: 200, body: contact };
    } catch (err) {
      if (isConstraintError(err, '23505', 'contacts_phone_key')) throw await phoneConflict(db, auth.workspaceId, body.phone!);
      throw err;
    }
  },

  async deleteContact({ db, auth, params }) {
    const erased = await transact(db, (trx) => eraseContact(trx, auth.workspaceId, params.id, new Date()));
    if (!erased) throw notFound('Contact');
    return { status: 204 };
  },
};
