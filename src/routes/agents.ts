// Handlers of the Agents operations.
import * as agents from '../db/agents.js';
import { apiKeyActor } from '../actor.js';
import { notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';
import { transact } from '../db/database.js';
import { deleteAgent } from '../services/agents.js';

export const agentHandlers: Pick<Handlers, 'listAgents' | 'getAgent' | 'createAgent' | 'updateAgent' | 'deleteAgent'> = {
  async listAgents({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await agents.listAgents(db, auth.workspaceId, { status: query.status }, page, limit) };
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
    const agent = await agents.updateAgent(db, auth.workspaceId, params.id, body);
    if (!agent) throw notFound('Agent');
    return { status: 200, body: agent };
  },

  async deleteAgent({ db, auth, params }) {
    if (!(await transact(db, (trx) => deleteAgent(trx, auth.workspaceId, params.id, apiKeyActor(auth.keyId))))) throw notFound('Agent');
    return { status: 204 };
  },
};
