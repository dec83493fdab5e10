// The registry of job kinds: every queue the service runs, with the payload type of its jobs, and
// the recurring schedules. Adding a job (enqueue) and handling one (QueueHandler<kind>) are checked
// against it, and src/workers.ts (the composition root) must start a worker for each kind. It imports no capability (they import
// it), so the payload types are declared here.
import type { MessageError } from '../db/messages.js';

/** A message's delivery, and a sandbox message's receipt. */
export interface DeliveryPayload {
  messageId: string;
  /**
   * Not the message itself but an action on it, sent in order with the contact's messages
   * (channels/conversation.ts): our reaction (`emoji`, "" removes it), or marking the customer's
   * message read (and showing that we are typing).
   */
  action?: ConversationAction | undefined;
}

export type ConversationAction = { type: 'reaction'; emoji: string } | { type: 'read'; typing: boolean };

/** A Meta status held until its message has Meta's id, with the channel it came on. */
export interface EarlyStatusPayload {
  channelId: string;
  externalId: string;
  status: string;
  error?: MessageError | undefined;
}

/** An attempt of a webhook delivery. */
export interface WebhookJobPayload {
  deliveryId: string;
  endpointId: string;
  /** A manual retry (POST .../retry) of a delivery that was no longer pending. */
  manual?: boolean;
  /** It had failed: a failed manual retry fails it again, with no new schedule. */
  wasFailed?: boolean;
}

/** An inbound file to fetch from Meta (media/fetch.ts). */
export interface MediaFetchPayload {
  mediaId: string;
  /** The message that carries it. */
  messageId: string;
  /** The channel it came on (its token, its Meta account). */
  channelId: string;
}

/** Stored bytes to delete (an erased person's files): the media store's keys. */
export interface MediaDeletePayload {
  keys: string[];
}

/** An event for the automations whose trigger it is (automations/engine.ts). */
export interface AutomationEventPayload {
  eventId: string;
  /** The trigger it is: its type, or `message.received` / `message.sent` for a message.created. */
  trigger: string;
  threadId: string | null;
  contactId: string | null;
  /** The automations whose actions caused the event, first to last (the loop guard's chain); empty for any other cause. */
  chain: string[];
  /**
   * The key of the event (or `idle:<message id>` silence) that began the chain, whose runs the
   * fan-out bound counts; absent on jobs queued before it existed (then the event is its own root).
   */
  root?: string;
}

/** A thread.idle timer (automations/engine.ts): due when `messageId`, the thread's last message, has been `minutes` old. */
export interface AutomationIdlePayload {
  automationId: string;
  threadId: string;
  messageId: string;
}

/**
 * A thread's SLA timer (sla/timers.ts): due at the earliest warning or due time still to record of
 * its clocks, which it reads when it falls due. (Timers added before there was one per thread also
 * carry the metric, clock start and kind of one time; they run as the thread's timer.)
 */
export interface SlaTimerPayload {
  threadId: string;
}

/** An AI agent's reply. */
export interface ReplyPayload {
  threadId: string;
  /** The inbound message the job answers. */
  messageId: string;
}

/**
 * Each kind (the jobs table's `queue`) and what its jobs carry. A payload is written only by
 * enqueue (or a statement builder of queue.ts) from this type, and read back from our own table:
 * the type is its check, it is not validated again when claimed.
 */
export interface JobPayloads {
  /** An outbound message to send (channels/deliveries.ts). */
  'message-delivery': DeliveryPayload;
  /** A sandbox message's delivery receipt (channels/deliveries.ts). */
  'sandbox-receipt': DeliveryPayload;
  /** A Meta status that came before its message had Meta's id (services/provider-statuses.ts). */
  'early-status': EarlyStatusPayload;
  /** An attempt of a webhook delivery (events/dispatcher.ts). */
  'webhook-delivery': WebhookJobPayload;
  /** An AI agent's reply to an inbound message (ai/replies.ts). */
  'ai-reply': ReplyPayload;
  /** An inbound file fetched from Meta and stored (media/fetch.ts). */
  'media-fetch': MediaFetchPayload;
  /** An erased person's stored files deleted from the media store (media/erase.ts). */
  'media-delete': MediaDeletePayload;
  /** The automations triggered by an event (automations/engine.ts). */
  'automation-event': AutomationEventPayload;
  /** A thread.idle timer falling due (automations/engine.ts). */
  'automation-idle': AutomationIdlePayload;
  /** An SLA warning or due time falling due (sla/timers.ts). */
  'sla-timer': SlaTimerPayload;
  /** The next run of a recurring schedule (jobs/recurring.ts). */
  recurring: RecurringPayload;
}

export type JobKind = keyof JobPayloads;

/** Every kind, at run time (what GET /metrics reports a queue for, none left out: `satisfies` checks it). */
export const JOB_KINDS = Object.keys({
  'message-delivery': true,
  'sandbox-receipt': true,
  'early-status': true,
  'webhook-delivery': true,
  'ai-reply': true,
  'media-fetch': true,
  'media-delete': true,
  'automation-event': true,
  'automation-idle': true,
  'sla-timer': true,
  recurring: true,
} satisfies Record<JobKind, true>) as JobKind[];

/** The payload of a queue's jobs: its registered type, or any JSON object for a queue outside the registry (tests, the bench). */
export type PayloadOf<Q extends string> = Q extends JobKind ? JobPayloads[Q] : Record<string, unknown>;

/**
 * Recurring work, run once per interval by whichever instance of the cluster claims it: each
 * schedule is one job (a fixed id), whose run does the work and moves the same job to its next run
 * in one transaction. Its task is given in src/workers.ts.
 */
export const SCHEDULES = {
  /** Events older than EVENT_RETENTION_DAYS, and their deliveries (events/purge.ts). */
  'purge-events': { everyMs: 3_600_000 },
  /** Idempotency-Key results past their 24 hours (idempotency.ts). */
  'purge-idempotency-keys': { everyMs: 3_600_000 },
  /** Automations' runs older than 30 days (automations/runs.ts). */
  'purge-automation-runs': { everyMs: 3_600_000 },
} as const satisfies Record<string, { everyMs: number }>;

export type ScheduleName = keyof typeof SCHEDULES;

export interface RecurringPayload {
  schedule: ScheduleName;
}
