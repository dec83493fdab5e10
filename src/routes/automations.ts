// Handlers of the automations: the resource, in position order, and the dry run. Every change of
// positions runs in one transaction that takes the workspace's automations lock first; what is
// stored was checked whole (the conditions and actions against their trigger, then the records
// they name), so nothing is stored on any error.
import { compileConditions, explainConditions, foldConditions } from '../automations/conditions.js';
import { loadThreadContext } from '../automations/context.js';
import { wouldDo } from '../automations/dry-run.js';
import { resetIdleTimers } from '../automations/triggers.js';
import { assertReferences, assertSound, assertWithinBound, MAX_AUTOMATIONS, referencesOf, type Definition } from '../automations/validate.js';
import * as automations from '../db/automations.js';
import type { Automation } from '../db/automations.js';
import { listAutomationRuns, listThreadRuns } from '../db/automation-runs.js';
import { transact } from '../db/database.js';
import { threadExists } from '../db/threads.js';
import { ApiError, invalidReference, notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

const positionOutOfRange = (max: number): ApiError =>
  new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body/position', message: `must be from 1 to ${max}` }]);

type Operations =
  | 'listAutomations'
  | 'createAutomation'
  | 'getAutomation'
  | 'updateAutomation'
  | 'deleteAutomation'
  | 'testAutomation'
  | 'listAutomationRuns'
  | 'listThreadAutomationRuns';

/** An enabled thread.idle automation: it has timers for the silences under way (automations/triggers.ts). */
function waitsForSilences(automation: Automation): automation is Automation & { trigger: { event: 'thread.idle' } } {
  return automation.enabled && automation.trigger.event === 'thread.idle';
}

export const automationHandlers: Pick<Handlers, Operations> = {
  async listAutomations({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await automations.listAutomations(db, auth.workspaceId, page, limit) };
  },

  async listAutomationRuns({ db, auth, params, query }) {
    const { page, limit } = paging(query);
    const runs = await listAutomationRuns(db, auth.workspaceId, params.id, page, limit);
    // A deleted automation's runs stay listed for their retention; an id with neither is unknown.
    if (runs.total === 0 && !(await automations.findAutomation(db, auth.workspaceId, params.id))) throw notFound('Automation');
    return { status: 200, body: runs };
  },

  async listThreadAutomationRuns({ db, auth, params, query }) {
    const { page, limit } = paging(query);
    if (!(await threadExists(db, auth.workspaceId, params.id))) throw notFound('Thread');
    return { status: 200, body: await listThreadRuns(db, auth.workspaceId, params.id, page, limit) };
  },

  async createAutomation({ db, auth, body }) {
    const definition: Definition = { trigger: body.trigger, conditions: body.conditions ?? {}, actions: body.actions };
    assertSound(definition);
    const automation = await transact(db, async (trx) => {
      const count = await automations.lockAutomations(trx, auth.workspaceId);
      const position = body.position ?? count + 1;
      if (position > count + 1) throw positionOutOfRange(count + 1);
      if (count >= MAX_AUTOMATIONS) {
        throw new ApiError(422, 'limit_reached', `A workspace has at most ${MAX_AUTOMATIONS} automations; delete one first.`);
      }
      await assertReferences(trx, auth.workspaceId, definition);
      const created = await automations.insertAutomation(
        trx,
        auth.workspaceId,
        { ...definition, foldedConditions: foldConditions(definition.conditions), name: body.name, enabled: body.enabled ?? true, position },
        new Date(),
      );
      if (waitsForSilences(created)) await resetIdleTimers(trx, auth.workspaceId, created.id, created.trigger);
      return created;
    });
    return { status: 201, body: automation };
  },

  async getAutomation({ db, auth, params }) {
    const row = await automations.findAutomation(db, auth.workspaceId, params.id);
    if (!row) throw notFound('Automation');
    return { status: 200, body: automations.automationRowToAutomation(row) };
  },

  async updateAutomation({ db, auth, params, body }) {
    const automation = await transact(db, async (trx) => {
      const count = await automations.lockAutomations(trx, auth.workspaceId);
      const current = await automations.findAutomation(trx, auth.workspaceId, params.id);
      if (!current) throw notFound('Automation');
      if (body.position !== undefined && body.position > count) throw positionOutOfRange(count);
      const definition: Definition = {
        trigger: body.trigger ?? current.trigger,
        conditions: body.conditions ?? current.conditions,
        actions: body.actions ?? current.actions,
      };
      if (body.trigger !== undefined || body.conditions !== undefined || body.actions !== undefined) {
        assertSound(definition);
        await assertReferences(trx, auth.workspaceId, definition);
      }
      const change = body.conditions === undefined ? body : { ...body, foldedConditions: foldConditions(body.conditions) };
      const updated = await automations.updateAutomation(trx, auth.workspaceId, current, change, new Date());
      const before = automations.automationRowToAutomation(current);
      const waitsChanged = before.enabled !== updated.enabled || JSON.stringify(before.trigger) !== JSON.stringify(updated.trigger);
      if (waitsChanged && (waitsForSilences(before) || waitsForSilences(updated))) {
        await resetIdleTimers(trx, auth.workspaceId, updated.id, waitsForSilences(updated) ? updated.trigger : undefined);
      }
      return updated;
    });
    return { status: 200, body: automation };
  },

  async deleteAutomation({ db, auth, params }) {
    await transact(db, async (trx) => {
      await automations.lockAutomations(trx, auth.workspaceId);
      const current = await automations.findAutomation(trx, auth.workspaceId, params.id);
      if (!current) throw notFound('Automation');
      await automations.deleteAutomation(trx, auth.workspaceId, current, new Date());
      if (current.trigger.event === 'thread.idle') await resetIdleTimers(trx, auth.workspaceId, current.id, undefined);
    });
    return { status: 204 };
  },

  async testAutomation({ db, auth, params, body }) {
    const row = await automations.findAutomation(db, auth.workspaceId, params.id);
    if (!row) throw notFound('Automation');
    assertWithinBound(row);
    const context = await loadThreadContext(db, auth.workspaceId, body.threadId, new Date());
    if (!context) throw invalidReference('threadId', 'thread');
    const automation = automations.automationRowToAutomation(row);
    const { matched, conditions } = explainConditions(compileConditions(automation.conditions), context);
    const ids = { stage: [context.thread!.stageId], agent: context.thread!.agentId ? [context.thread!.agentId] : [], channel: [] as string[] };
    for (const reference of referencesOf(automation)) ids[reference.kind].push(reference.id.toLowerCase());
    const names = await automations.referencedNames(db, auth.workspaceId, ids);
    const actions = automation.actions.map((action) => ({ type: action.type, wouldDo: wouldDo(action, context, names) }));
    return { status: 200, body: { matched, conditions, actions } };
  },
};
