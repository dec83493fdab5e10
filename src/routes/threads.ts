// Handlers of the Threads operations, NPS included.
import * as threads from '../db/threads.js';
import { ApiError, notFound } from '../errors.js';
import { EARLIEST_INSTANT, instantToDate, npsStats, parseInstant } from '../services/nps.js';
import { paging, type Handlers } from './handler.js';

const invalid = (path: string, message: string): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path, message }]);

/** A date-time of the request in microseconds since the epoch, or the 400 its field deserves. */
function instantOf(text: string, path: string): bigint {
  const instant = parseInstant(text);
  if (instant === undefined) throw invalid(path, 'must match format "date-time"');
  return instant;
}

/** An NPS answer's time: PostgreSQL stores nothing before year 0001. */
function answerInstant(text: string, path: string): bigint {
  const instant = instantOf(text, path);
  if (instant < EARLIEST_INSTANT) throw invalid(path, 'must not be before year 0001');
  return instant;
}

/** No answer is stored before year 0001, so an earlier window bound counts from there. */
const storable = (instant: bigint): bigint => (instant < EARLIEST_INSTANT ? EARLIEST_INSTANT : instant);

export const threadHandlers: Pick<Handlers, 'listThreads' | 'getThread' | 'createThread' | 'registerNps' | 'getNpsStats'> = {
  async listThreads({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = { status: query.status, contactId: query.contactId, channelId: query.channelId, agentId: query.agentId };
    return { status: 200, body: await threads.listThreads(db, auth.workspaceId, filter, page, limit) };
  },

  async getThread({ db, auth, params }) {
    const thread = await threads.getThread(db, auth.workspaceId, params.id);
    if (!thread) throw notFound('Thread');
    return { status: 200, body: thread };
  },

  async createThread({ db, auth, body }) {
    const row = await threads.insertOpenThread(db, auth.workspaceId, body, new Date());
    if (row) return { status: 201, body: threads.threadRowToThread(row) };
    const existingId = await threads.findOpenThreadId(db, auth.workspaceId, body.contactId, body.channelId);
    throw new ApiError(409, 'conflict', 'This contact already has an open thread on this channel.', [
      { path: '/body/channelId', message: `open thread ${existingId}`, ...(existingId && { existingId }) },
    ]);
  },

  async registerNps({ db, auth, params, body }) {
    const answeredAt = body.answeredAt === undefined ? new Date() : instantToDate(answerInstant(body.answeredAt, '/body/answeredAt'));
    if (answeredAt.getTime() > Date.now()) throw invalid('/body/answeredAt', 'must not be in the future');
    const thread = await threads.setNpsAnswer(db, auth.workspaceId, params.id, body.score, answeredAt);
    if (thread) return { status: 201, body: thread };
    if (!(await threads.threadExists(db, auth.workspaceId, params.id))) throw notFound('Thread');
    throw new ApiError(409, 'conflict', 'This thread already has an NPS answer.');
  },

  async getNpsStats({ db, auth, query }) {
    if (query.workspaceId.toLowerCase() !== auth.workspaceId) {
      throw new ApiError(403, 'forbidden', 'This API key cannot read another workspace.');
    }
    const from = instantOf(query.dateFrom, '/query/dateFrom');
    const to = instantOf(query.dateTo, '/query/dateTo');
    if (from > to) throw invalid('/query/dateFrom', 'must not be after dateTo');
    const counts = await threads.countNpsAnswers(db, auth.workspaceId, storable(from), storable(to));
    return { status: 200, body: npsStats(counts) };
  },
};
