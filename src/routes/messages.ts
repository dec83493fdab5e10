// Handlers of the Messages operations.
import { apiKeyActor } from '../actor.js';
import { listThreadMessages } from '../db/messages.js';
import { threadExists } from '../db/threads.js';
import { notFound } from '../errors.js';
import { sendMessage } from '../services/messages.js';
import { reactToMessage } from '../services/conversation.js';
import { paging, type Handlers } from './handler.js';

export const messageHandlers: Pick<Handlers, 'sendMessage' | 'listThreadMessages' | 'reactToMessage'> = {
  async sendMessage({ db, auth, body }) {
    return { status: 201, body: await sendMessage(db, auth.workspaceId, body, apiKeyActor(auth.keyId)) };
  },

  async reactToMessage({ db, auth, params, body }) {
    return { status: 202, body: await reactToMessage(db, auth.workspaceId, params.id, body.emoji, apiKeyActor(auth.keyId)) };
  },

  async listThreadMessages({ db, auth, params, query }) {
    const { page, limit } = paging(query);
    const result = await listThreadMessages(db, auth.workspaceId, params.threadId, page, limit);
    if (result.total === 0 && !(await threadExists(db, auth.workspaceId, params.threadId))) {
      throw notFound('Thread');
    }
    return { status: 200, body: result };
  },
};
