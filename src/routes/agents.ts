// Handlers of the Agents operations.
import * as agents from '../db/agents.js';
import { apiKeyActor } from '../actor.js';
import { ApiError, notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';
import { transact } from '../db/database.js';
import { agentPatchProblems, deleteAgent } from '../services/agents.js';

export const agentHandlers: Pick<Handlers, 'listAgents' | 'getAgent' | 'createAgent' | 'updateAgent' | 'deleteAgent'> = {
  async listAgents({ db, auth, query }) {
    const { page, limit } = paging(query);
    const filter = { status: query.status, type: query.type, availability: query.availability };
    return { status: 200, body: await agents.listAgents(db, auth.workspaceId, filter, page, limit) };
  },

  async getAgent({ db, auth, params }) {
    const agent = await agents.getAgent(db, auth.workspaceId, params.id);
    if (!agent) throw notFound('Agent');
    return { status: 200, body: agent };
  },

  async createAgent({ db, auth, body }) {
    return { status: 201, body: await agents.createAgent(db, auth.workspaceId, body) };
  },

  async updateAgent({ db, auth, params, body }) {
    const type = await agents.getAgentType(db, auth.workspaceId, params.id);
    if (!type) throw notFound('Agent');
    const problems = agentPatchProblems(type, body);
    if (problems.length > 0) throw new ApiError(400, 'validation_error', 'The request does not match the contract.', problems);
    // The type never changes, so the check above still holds when the update runs.
    const agent = await agents.updateAgent(db, auth.workspaceId, params.id, body);
    if (!agent) throw notFound('Agent');
    return { status: 200, body: agent };
  },

  async deleteAgent({ db, auth, params }) {
    if (!(await transact(db, (trx) => deleteAgent(trx, auth.workspaceId, params.id, apiKeyActor(auth.keyId))))) throw notFound('Agent');
    return { status: 204 };
  },
};
