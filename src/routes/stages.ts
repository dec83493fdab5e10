// Handlers of the Funnel's stage operations. Every change of positions runs in one transaction that
// locks the workspace's funnel first.
import * as stages from '../db/stages.js';
import { transact } from '../db/database.js';
import { ApiError, isConstraintError, notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

const positionOutOfRange = (max: number): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body/position', message: `must be from 1 to ${max}` }]);

export const stageHandlers: Pick<Handlers, 'listStages' | 'createStage' | 'updateStage' | 'deleteStage'> = {
  async listStages({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await stages.listStages(db, auth.workspaceId, page, limit) };
  },

  async createStage({ db, auth, body }) {
    const stage = await transact(db, async (trx) => {
      const count = await stages.lockFunnel(trx, auth.workspaceId);
      const position = body.position ?? count + 1;
      if (position > count + 1) throw positionOutOfRange(count + 1);
      return stages.insertStage(trx, auth.workspaceId, body.name, position, new Date());
    });
    return { status: 201, body: stage };
  },

  async updateStage({ db, auth, params, body }) {
    const stage = await transact(db, async (trx) => {
      const count = await stages.lockFunnel(trx, auth.workspaceId);
      const current = await stages.findStage(trx, auth.workspaceId, params.id);
      if (!current) throw notFound('Stage');
      if (body.position !== undefined && body.position > count) throw positionOutOfRange(count);
      return stages.updateStage(trx, auth.workspaceId, current, body, new Date());
    });
    return { status: 200, body: stage };
  },

  async deleteStage({ db, auth, params }) {
    try {
      await transact(db, async (trx) => {
        const count = await stages.lockFunnel(trx, auth.workspaceId);
        const current = await stages.findStage(trx, auth.workspaceId, params.id);
        if (!current) throw notFound('Stage');
        if (count === 1) throw new ApiError(409, 'conflict', 'A funnel keeps at least one stage; this is its only one.');
        await stages.deleteStage(trx, auth.workspaceId, current, new Date());
      });
    } catch (err) {
      if (isConstraintError(err, '23503', 'threads_workspace_id_stage_id_fkey')) {
        throw new ApiError(409, 'conflict', 'This stage holds threads; move them to another stage first.');
      }
      throw err;
    }
    return { status: 204 };
  },
};
