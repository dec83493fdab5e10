// Handlers of the Threads operations, NPS included.
import * as threads from '../db/threads.js';
import { ApiError, notFound } from '../errors.js';
import { npsStats } from '../services/nps.js';
import { paging, type Handlers } from './handler.js';

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
    const answeredAt = body.answeredAt === undefined ? new Date() : new Date(body.answeredAt);
    if (answeredAt.getTime() > Date.now()) {
      throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
        { path: '/body/answeredAt', message: 'must not be in the future' },
      ]);
    }
    const thread = await threads.setNpsAnswer(db, auth.workspaceId, params.id, body.score, answeredAt);
    if (thread) return { status: 201, body: thread };
    if (!(await threads.threadExists(db, auth.workspaceId, params.id))) throw notFound('Thread');
    throw new ApiError(409, 'conflict', 'This thread already has an NPS answer.');
  },

  async getNpsStats({ db, auth, query }) {
    if (query.workspaceId.toLowerCase() !== auth.workspaceId) {
      throw new ApiError(403, 'forbidden', 'This API key cannot read another workspace.');
    }
    if (Date.parse(query.dateFrom) > Date.parse(query.dateTo)) {
      throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
        { path: '/query/dateFrom', message: 'must not be after dateTo' },
      ]);
    }
    const counts = await threads.countNpsAnswers(db, auth.workspaceId, query.dateFrom, query.dateTo);
    return { status: 200, body: npsStats(counts) };
  },
};
