// Every operation of the contract mapped to its handler, by operationId.
import type { Handlers } from './handler.js';
import { agentHandlers } from './agents.js';
import { channelHandlers } from './channels.js';
import { contactHandlers } from './contacts.js';
import { meHandlers } from './me.js';
import { messageHandlers } from './messages.js';
import { mediaHandlers } from './media.js';
import { settingsHandlers } from './settings.js';
import { stageHandlers } from './stages.js';
import { threadHandlers } from './threads.js';
import { eventHandlers } from './events.js';
import { webhookEndpointHandlers } from './webhook-endpoints.js';
import { automationHandlers } from './automations.js';
import { slaHandlers } from './sla.js';

export const handlers: Handlers = {
  ...meHandlers,
  ...agentHandlers,
  ...contactHandlers,
  ...channelHandlers,
  ...messageHandlers,
  ...mediaHandlers,
  ...threadHandlers,
  ...stageHandlers,
  ...eventHandlers,
  ...webhookEndpointHandlers,
  ...settingsHandlers,
  ...automationHandlers,
  ...slaHandlers,
};
