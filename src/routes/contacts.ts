// Handlers of the Contacts operations.
import * as contacts from '../db/contacts.js';
import { ApiError, notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

export const contactHandlers: Pick<Handlers, 'listContacts' | 'getContact' | 'createContact'> = {
  async listContacts({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = { q: query.q, phone: query.phone, email: query.email };
    return { status: 200, body: await contacts.listContacts(db, auth.workspaceId, filter, page, limit) };
  },

  async getContact({ db, auth, params }) {
    const contact = await contacts.getContact(db, auth.workspaceId, params.id);
    if (!contact) throw notFound('Contact');
    return { status: 200, body: contact };
  },

  async createContact({ db, auth, body }) {
    const contact = await contacts.insertContact(db, auth.workspaceId, body);
    if (contact) return { status: 201, body: contact };
    const existingId = await contacts.findContactIdByPhone(db, auth.workspaceId, body.phone!);
    throw new ApiError(409, 'conflict', 'A contact with this phone already exists.', [
      { path: '/body/phone', message: `already used by contact ${existingId}`, ...(existingId && { existingId }) },
    ]);
  },
};
