// A message's status moving (its delivery's outcome, the sandbox's receipt, Meta's statuses), or its
// reactions changing (services/conversation.ts), with its message.updated event, in one statement:
// message.updated is recorded here only. Kept apart from services/messages.ts so that the delivery
// jobs (channels/deliveries.ts) import this alone.
import { sql, type OperationNodeSource, type RawBuilder } from 'kysely';
import type { Actor } from '../actor.js';
import type { Db } from '../db/database.js';
import { messageEventSource } from '../db/messages.js';
import { recordChangeEvent } from '../events/record.js';

/**
 * The one emitter of message.updated. Runs `change` (an UPDATE of messages returning the message,
 * e.g. db/messages.ts markSent), its event and `also` (more WITH queries, such as ending the job
 * that made the change) in one statement: one round trip, all or nothing. True when the message
 * moved (and its event was recorded); false when the UPDATE matched nothing.
 */
export async function moveMessage(
  db: Db,
  workspaceId: string,
  change: OperationNodeSource,
  actor: Actor,
  options: { also?: RawBuilder<unknown>; now?: Date } = {},
): Promise<boolean> {
  const { also, now = new Date() } = options;
  const changed = sql`changed as (${change})`;
  return recordChangeEvent(
    db,
    workspaceId,
    'message.updated',
    { with: also ? sql`${changed}, ${also}` : changed, source: messageEventSource('changed') },
    actor,
    now,
  );
}
