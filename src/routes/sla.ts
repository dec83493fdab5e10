// Handlers of the service levels: SLA policies in position order (every change of positions in one
// transaction holding the workspace's policies lock; what is stored was checked whole, so nothing
// is stored on any error; a change of what a policy times moves the running clocks held to it in the
// same transaction; this process's cache of the enabled policies forgets the workspace's inside the
// transaction and again after it commits), and the response-time report.
import { ApiError, notFound } from '../errors.js';
import { transact } from '../db/database.js';
import { onPolicyChanged } from '../sla/clocks.js';
import * as policies from '../sla/policies.js';
import { reportWindow, responseTimes } from '../sla/report.js';
import { paging, type Handlers } from './handler.js';

const positionOutOfRange = (max: number): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body/position', message: `must be from 1 to ${max}` }]);

type Operations = 'listSlaPolicies' | 'createSlaPolicy' | 'getSlaPolicy' | 'updateSlaPolicy' | 'deleteSlaPolicy' | 'getResponseTimesReport';

export const slaHandlers: Pick<Handlers, Operations> = {
  async listSlaPolicies({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await policies.listPolicies(db, auth.workspaceId, page, limit) };
  },

  async createSlaPolicy({ db, auth, body }) {
    const conditions = body.conditions ?? {};
    const policy = await transact(db, async (trx) => {
      const count = await policies.lockPolicies(trx, auth.workspaceId);
      const position = body.position ?? count + 1;
      if (position > count + 1) throw positionOutOfRange(count + 1);
      await policies.assertPolicySound(trx, auth.workspaceId, conditions);
      if (count >= policies.MAX_SLA_POLICIES) {
        throw new ApiError(422, 'limit_reached', `A workspace has at most ${policies.MAX_SLA_POLICIES} SLA policies; delete one first.`);
      }
      policies.forgetPolicies(auth.workspaceId);
      return policies.insertPolicy(
        trx,
        auth.workspaceId,
        {
          name: body.name,
          enabled: body.enabled ?? true,
          position,
          conditions,
          targets: body.targets,
          businessHoursOnly: body.businessHoursOnly ?? false,
          humanOnly: body.humanOnly ?? false,
          warnBeforeMinutes: body.warnBeforeMinutes ?? null,
        },
        new Date(),
      );
    });
    policies.forgetPolicies(auth.workspaceId);
    return { status: 201, body: policy };
  },

  async getSlaPolicy({ db, auth, params }) {
    const row = await policies.findPolicy(db, auth.workspaceId, params.id);
    if (!row) throw notFound('SLA policy');
    return { status: 200, body: policies.policyRowToPolicy(row) };
  },

  async updateSlaPolicy({ db, auth, params, body }) {
    const policy = await transact(db, async (trx) => {
      const count = await policies.lockPolicies(trx, auth.workspaceId);
      const current = await policies.findPolicy(trx, auth.workspaceId, params.id);
      if (!current) throw notFound('SLA policy');
      if (body.position !== undefined && body.position > count) throw positionOutOfRange(count);
      if (body.conditions !== undefined) await policies.assertPolicySound(trx, auth.workspaceId, body.conditions);
      const now = new Date();
      policies.forgetPolicies(auth.workspaceId);
      const updated = await policies.updatePolicy(trx, auth.workspaceId, current, body, now);
      if (policies.movesClocks(current, body)) await onPolicyChanged(trx, auth.workspaceId, current.id, now);
      return updated;
    });
    policies.forgetPolicies(auth.workspaceId);
    return { status: 200, body: policy };
  },

  async deleteSlaPolicy({ db, auth, params }) {
    await transact(db, async (trx) => {
      await policies.lockPolicies(trx, auth.workspaceId);
      const current = await policies.findPolicy(trx, auth.workspaceId, params.id);
      if (!current) throw notFound('SLA policy');
      const now = new Date();
      policies.forgetPolicies(auth.workspaceId);
      await policies.deletePolicy(trx, auth.workspaceId, current, now);
      await onPolicyChanged(trx, auth.workspaceId, current.id, now);
    });
    policies.forgetPolicies(auth.workspaceId);
    return { status: 204 };
  },

  async getResponseTimesReport({ db, auth, query }) {
    const window = reportWindow(query.dateFrom, query.dateTo);
    const body = await responseTimes(db, auth.workspaceId, window, { groupBy: query.groupBy, businessHours: query.businessHours ?? false });
    return { status: 200, body };
  },
};
