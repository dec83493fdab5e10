// Agents' rules beyond the contract: which fields a PATCH may change depends on the agent's type
// (AI agents: instructions, model; people: availability, capacity). Deleting an agent: its threads
// are unassigned, each with its history entry and its thread.updated event by whoever deleted it,
// in one transaction; an AI agent's open threads restart their first-response clocks (a handoff to people).
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import { deleteAgent as deleteAgentRecords, getAgentType } from '../db/agents.js';
import type { Db } from '../db/database.js';
import type { AgentType } from '../db/schema.js';
import type { ErrorDetail } from '../errors.js';
import * as sla from '../sla/clocks.js';
import { threadUpdated } from './threads.js';

type AgentUpdate = components['schemas']['AgentUpdate'];

const ONLY: Record<AgentType, { fields: readonly (keyof AgentUpdate)[]; message: string }> = {
  ai: { fields: ['availability', 'capacity'], message: 'only a human agent has it; this agent is an AI agent' },
  human: { fields: ['instructions', 'model'], message: 'only an AI agent has it; this agent is a human agent' },
};

/** The 400 details of a PATCH that names a field the agent's type does not have; empty when none. */
export function agentPatchProblems(type: AgentType, patch: AgentUpdate): ErrorDetail[] {
  return ONLY[type].fields.filter((field) => patch[field] !== undefined).map((field) => ({ path: `/body/${field}`, message: ONLY[type].message }));
}

/** Deletes an agent; false when there was none. Run it in a transaction. */
export async function deleteAgent(trx: Db, workspaceId: string, id: string, actor: Actor): Promise<boolean> {
  const type = await getAgentType(trx, workspaceId, id);
  const unassigned = await deleteAgentRecords(trx, workspaceId, id, actor);
  if (!unassigned) return false;
  // An AI agent gone hands its threads to people: their first-response clocks start again (sla/clocks.ts).
  const threads = type === 'ai' ? await sla.onAiAgentGone(trx, unassigned, new Date()) : unassigned;
  for (const thread of threads) await threadUpdated(trx, workspaceId, thread, actor);
  return true;
}
