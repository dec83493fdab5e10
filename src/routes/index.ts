// Every operation of the contract mapped to its handler, by operationId.
import type { Handlers } from './handler.js';
import { agentHandlers } from './agents.js';
import { channelHandlers } from './channels.js';
import { contactHandlers } from './contacts.js';
import { messageHandlers } from './messages.js';
import { threadHandlers } from './threads.js';

export const handlers: Handlers = {
  ...agentHandlers,
  ...contactHandlers,
  ...channelHandlers,
  ...messageHandlers,
  ...threadHandlers,
};
