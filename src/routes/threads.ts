// Handlers of the Threads operations: changes and their history, NPS (answers, the question asked in
// the conversation) and funnel statistics included.
import { funnelCounts } from '../db/funnel.js';
import { apiKeyActor } from '../actor.js';
import { listThreadHistory } from '../db/history.js';
import { countNpsGroups } from '../db/nps-groups.js';
import * as threads from '../db/threads.js';
import { ApiError, invalidReference, isConstraintError, notFound } from '../errors.js';
import { changeThread, openThread } from '../services/threads.js';
import { answerNps, npsGroupStats, npsStats } from '../services/nps.js';
import { requestNps } from '../services/nps-requests.js';
import { markThreadRead } from '../services/conversation.js';
import { EARLIEST_INSTANT, instantToDate, instantToIso, parseInstant } from '../time.js';
import { paging, type Handlers } from './handler.js';
import { transact } from '../db/database.js';

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

/** A statistics window [dateFrom, dateTo] in microseconds, or the 400 it deserves. */
function windowOf(query: { dateFrom: string; dateTo: string }): { from: bigint; to: bigint } {
  const from = instantOf(query.dateFrom, '/query/dateFrom');
  const to = instantOf(query.dateTo, '/query/dateTo');
  if (from > to) throw invalid('/query/dateFrom', 'must not be after dateTo');
  return { from: storable(from), to: storable(to) };
}

const openPairConflict = (existingId: string | undefined, path: string): ApiError =>
  new ApiError(409, 'conflict', 'This contact already has an open thread on this channel.', [
    { path, message: `open thread ${existingId}`, ...(existingId && { existingId }) },
  ]);

export const threadHandlers: Pick<
  Handlers,
  | 'listThreads'
  | 'getThread'
  | 'createThread'
  | 'updateThread'
  | 'listThreadHistory'
  | 'registerNps'
  | 'requestNps'
  | 'markThreadRead'
  | 'getNpsStats'
  | 'getFunnelStats'
> = {
  async listThreads({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = {
      status: query.status,
      contactId: query.contactId,
      channelId: query.channelId,
      agentId: query.agentId,
      stageId: query.stageId,
      labels: query.label,
    };
    return { status: 200, body: await threads.listThreads(db, auth.workspaceId, filter, page, limit) };
  },

  async markThreadRead({ db, auth, params, body }) {
    const thread = await markThreadRead(db, auth.workspaceId, params.id, body.typing ?? false);
    if (!thread) throw notFound('Thread');
    return { status: 202, body: thread };
  },

  async getThread({ db, auth, params }) {
    const thread = await threads.getThread(db, auth.workspaceId, params.id);
    if (!thread) throw notFound('Thread');
    return { status: 200, body: thread };
  },

  async createThread({ db, auth, body }) {
    const row = await transact(db, (trx) => openThread(trx, auth.workspaceId, body, new Date(), apiKeyActor(auth.keyId)));
    if (row) return { status: 201, body: threads.threadRowToThread(row) };
    if (!(await threads.contactIsLive(db, auth.workspaceId, body.contactId))) throw invalidReference('contactId', 'contact');
    throw openPairConflict(await threads.findOpenThreadId(db, auth.workspaceId, body.contactId, body.channelId), '/body/channelId');
  },

  async updateThread({ db, auth, params, body }) {
    const { reason, ...change } = body;
    try {
      const row = await changeThread(db, auth.workspaceId, params.id, change, { actor: apiKeyActor(auth.keyId), reason: reason ?? null });
      if (!row) throw notFound('Thread');
      return { status: 200, body: threads.threadRowToThread(row) };
    } catch (err) {
      if (!isConstraintError(err, '23505', 'threads_one_open_per_pair_key')) throw err;
      const thread = await threads.getThread(db, auth.workspaceId, params.id);
      const existingId = thread && (await threads.findOpenThreadId(db, auth.workspaceId, thread.contactId, thread.channelId));
      throw openPairConflict(existingId, '/body/status');
    }
  },

  async listThreadHistory({ db, auth, params, query }) {
    const { page, limit } = paging(query);
    const result = await listThreadHistory(db, auth.workspaceId, params.id, page, limit);
    if (result.total === 0 && !(await threads.threadExists(db, auth.workspaceId, params.id))) throw notFound('Thread');
    return { status: 200, body: result };
  },

  async registerNps({ db, auth, params, body }) {
    const answeredAt = body.answeredAt === undefined ? new Date() : instantToDate(answerInstant(body.answeredAt, '/body/answeredAt'));
    if (answeredAt.getTime() > Date.now()) throw invalid('/body/answeredAt', 'must not be in the future');
    const thread = await transact(db, (trx) => answerNps(trx, auth.workspaceId, params.id, body.score, answeredAt, apiKeyActor(auth.keyId), 'api'));
    if (thread) return { status: 201, body: thread };
    if (!(await threads.threadExists(db, auth.workspaceId, params.id))) throw notFound('Thread');
    throw new ApiError(409, 'conflict', 'This thread already has an NPS answer.');
  },

  async requestNps({ db, auth, params }) {
    return { status: 200, body: await requestNps(db, auth.workspaceId, params.id, apiKeyActor(auth.keyId)) };
  },

  async getNpsStats({ db, auth, query }) {
    if (query.workspaceId.toLowerCase() !== auth.workspaceId) {
      throw new ApiError(403, 'forbidden', 'This API key cannot read another workspace.');
    }
    const { from, to } = windowOf(query);
    const counts = await threads.countNpsAnswers(db, auth.workspaceId, from, to);
    if (!query.groupBy) return { status: 200, body: npsStats(counts) };
    const groups = await countNpsGroups(db, auth.workspaceId, from, to, query.groupBy);
    return { status: 200, body: { ...npsStats(counts), groups: groups.map(npsGroupStats) } };
  },

  async getFunnelStats({ db, auth, query }) {
    const { from, to } = windowOf(query);
    const stages = await funnelCounts(db, auth.workspaceId, instantToIso(from), instantToIso(to));
    return {
      status: 200,
      body: {
        stages: stages.map(({ medianMs, ...counts }) => ({ ...counts, medianSecondsInStage: medianMs === null ? null : medianMs / 1000 })),
      },
    };
  },
};
