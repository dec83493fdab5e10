// Handlers of the Events operations: the event log.
import { getEvent, listEvents } from '../events/record.js';
import { notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

export const eventHandlers: Pick<Handlers, 'listEvents' | 'getEvent'> = {
  async listEvents({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await listEvents(db, auth.workspaceId, query.type, page, limit) };
  },

  async getEvent({ db, auth, params }) {
    const event = await getEvent(db, auth.workspaceId, params.id);
    if (!event) throw notFound('Event');
    return { status: 200, body: event };
  },
};
