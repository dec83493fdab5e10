// Every operation of the contract mapped to its handler, by operationId.
import type { OperationId } from '../contract.js';
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

/**
 * The POSTs whose handler does nothing outside the database until it returns (no HTTP call, no
 * Redis, no file, no change of this process' state but caching what it read; the jobs and events
 * they add are rows): under an Idempotency-Key, the key's lookup travels with their first statement
 * instead of costing a round trip of its own, and a key that turns out to be another request's rolls
 * all they did back (runIdempotent's `withFirstStatement`). An operation added here must stay so;
 * one doing anything else before it returns would do it again on every retry of the key.
 */
export const databaseOnlyOperations: ReadonlySet<OperationId> = new Set<OperationId>([
  'createAgent',
  'createAutomation',
  'createChannel',
  'createContact',
  'createStage',
  'createStreamToken',
  'createThread',
  'markThreadRead',
  'mergeContact',
  'reactToMessage',
  'registerNps',
  'requestNps',
  'retryWebhookDelivery',
  'sendMessage',
  'testAutomation',
  'upsertContact',
]);

/** The other POSTs, whose key is looked up before their handler runs, and why (a test holds every POST to one of the two). */
export const keyFirstOperations: Readonly<Partial<Record<OperationId, string>>> = {
  uploadMedia: "writes the file's bytes to the media store before its statement",
  createWebhookEndpoint: "resolves the URL's host (DNS) to refuse private addresses",
  createSlaPolicy: "forgets this process' cached policies before its statement",
  simulateSandboxInbound: "receives as Meta's webhooks do (services/receive.ts): not reviewed for running before its key is confirmed",
};
