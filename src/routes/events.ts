// Handlers of the Events operations: the event log, and its live stream (src/stream/).
import { getEvent, listEvents } from '../events/record.js';
import { ApiError, notFound } from '../errors.js';
import { answerStreamHead, serveStream } from '../stream/connection.js';
import { createStreamToken } from '../stream/tokens.js';
import { paging, type Handlers } from './handler.js';

// Retry-After as every 429 carries it: no stream ends at a known time, so a few seconds, the least a
// client should wait before it tries again (an EventSource does not retry a 429 by itself).
const tooManyStreams = (perKey: number): ApiError =>
  new ApiError(
    429,
    'too_many_streams',
    `This API key already has ${perKey} event streams open on this instance, its most; close one before opening another.`,
    undefined,
    { 'Retry-After': '5' },
  );

export const eventHandlers: Pick<Handlers, 'listEvents' | 'getEvent' | 'streamEvents' | 'createStreamToken'> = {
  async listEvents({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await listEvents(db, auth.workspaceId, query.type, page, limit) };
  },

  async getEvent({ db, auth, params }) {
    const event = await getEvent(db, auth.workspaceId, params.id);
    if (!event) throw notFound('Event');
    return { status: 200, body: event };
  },

  // eslint-disable-next-line @typescript-eslint/require-await -- a handler returns a promise; this one answers at once (the stream runs after)
  async streamEvents({ auth, query, services, log }) {
    const streams = services.streams;
    if (!streams) throw new ApiError(503, 'service_unavailable', 'Event streams are not available on this instance.');
    return {
      status: 200,
      stream: async (req, res) => {
        if (req.method === 'HEAD') return answerStreamHead(res);
        const release = streams.slots.take(auth.keyId);
        if (!release) throw tooManyStreams(streams.slots.perKey);
        // A client already gone (while it was authenticated) frees its slot at once.
        if (res.closed) return release();
        res.once('close', release);
        await serveStream(
          streams,
          res,
          { workspaceId: auth.workspaceId, keyId: auth.keyId, types: query.types, lastEventId: req.get('last-event-id') ?? query.lastEventId },
          log,
        );
      },
    };
  },

  async createStreamToken({ db, auth }) {
    const { token, expiresAt } = await createStreamToken(db, auth);
    return { status: 201, body: { token, expiresAt: expiresAt.toISOString() } };
  },
};
