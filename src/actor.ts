// Who makes a change: started where the change starts (the request's API key, the AI agent, the
// service itself for Meta's deliveries and the jobs) and passed along, as a value, to the thread's
// history entry and to the change's event (`data.actor`). openapi.yaml's Actor says which actor
// each event type gets.
import type { components } from '../generated/api.js';

export type Actor = components['schemas']['Actor'];

/** The service itself: a customer's inbound message and what it creates, a message's delivery and statuses. */
export const SYSTEM: Actor = Object.freeze({ type: 'system', id: null });

/** The API key making a change. */
export const apiKeyActor = (keyId: string): Actor => ({ type: 'api_key', id: keyId });

/** An AI agent making a change (its reply, its handoff). */
export const agentActor = (agentId: string): Actor => ({ type: 'agent', id: agentId });

/**
 * An automation's actions. `chain` is the automations whose runs led here, this one last, and
 * `root` the key of the event (or silence) that began the chain: they travel with the actor to the
 * events the actions record (not into them), and from there to the runs those events trigger, for
 * the loop guard (automations/engine.ts).
 */
export interface AutomationActor extends Actor {
  type: 'automation';
  id: string;
  chain: readonly string[];
  root: string | null;
}

export const automationActor = (id: string, causedBy: readonly string[], root: string | null): AutomationActor => ({
  type: 'automation',
  id,
  chain: [...causedBy, id],
  root,
});

/** The automations that caused a change by `actor`, first to last; empty when no automation did. */
export const causationOf = (actor: Actor): readonly string[] => ('chain' in actor && Array.isArray(actor.chain) ? (actor.chain as string[]) : []);

/** The key of the event or silence whose chain of automations caused a change by `actor`; null when no automation did. */
export const rootOf = (actor: Actor): string | null => ('root' in actor && typeof actor.root === 'string' ? actor.root : null);

/** The automation that made a change (its messages are marked with it); undefined for any other actor. */
export const automationOf = (actor: Actor): string | undefined => (actor.type === 'automation' && actor.id ? actor.id : undefined);
