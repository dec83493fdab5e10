// A workspace's SLA policies: positions 1..n without gaps (as automations: every change of
// positions takes the workspace's policies lock first, a deferred unique constraint checks the
// result at commit), their checks before they are stored (the automations' condition grammar over
// the thread, its contact and its channel; the records they name), and the choice of the policy a
// thread is held to. The one module that writes sla_policies.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import { compileConditions, conditionsHold, holdAlways, readsField, type ConditionContext } from '../automations/conditions.js';
import { threadFacts, withHours } from '../automations/context.js';
import { assertReferences, definitionProblems, type Definition } from '../automations/validate.js';
import type { Db } from '../db/database.js';
import { listPage, listSource, type PageText } from '../db/pagination.js';
import type { SlaPolicyRow } from '../db/schema.js';
import { ApiError } from '../errors.js';
import type { Settings } from '../services/settings.js';
import { NAME_MAX, normalizedName } from '../text.js';

export type SlaPolicy = components['schemas']['SlaPolicy'];
type Conditions = components['schemas']['AutomationConditions'];

export const MAX_SLA_POLICIES = 20;

export function policyRowToPolicy(row: SlaPolicyRow): SlaPolicy {
  return {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    position: row.position,
    conditions: row.conditions,
    targets: row.targets,
    businessHoursOnly: row.business_hours_only,
    humanOnly: row.human_only,
    warnBeforeMinutes: row.warn_before_minutes,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const policyList = listSource<SlaPolicy>(
  'sla_policies',
  {
    id: 'id',
    name: 'name',
    enabled: 'enabled',
    position: 'position',
    conditions: 'conditions',
    targets: 'targets',
    businessHoursOnly: 'business_hours_only',
    humanOnly: 'human_only',
    warnBeforeMinutes: 'warn_before_minutes',
    createdAt: { instant: 'created_at' },
    updatedAt: { instant: 'updated_at' },
  },
  { order: ['position'] },
);

export async function listPolicies(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<SlaPolicy>> {
  return listPage(db, policyList, [['workspace_id = ?', workspaceId]], { page, limit });
}

/** The workspace's policies lock, until the transaction ends; answers how many it has. */
export async function lockPolicies(trx: Db, workspaceId: string): Promise<number> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`sla-policies/${workspaceId}`}, 20))`.execute(trx);
  const row = await trx
    .selectFrom('sla_policies')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function findPolicy(db: Db, workspaceId: string, id: string): Promise<SlaPolicyRow | undefined> {
  return db.selectFrom('sla_policies').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
}

/** What a policy is made of, checked and stored. */
export type PolicyFields = Omit<SlaPolicy, 'id' | 'position' | 'createdAt' | 'updatedAt'>;

/**
 * Throws the 400 of conditions outside the grammar (the automations' over the thread, its contact
 * and its channel: the fields a thread.created trigger sees) and then the 422 of records they name
 * that the workspace does not have. Targets and their bounds are the contract's.
 */
export async function assertPolicySound(db: Db, workspaceId: string, conditions: Conditions): Promise<void> {
  const definition: Definition = { trigger: { event: 'thread.created' }, conditions, actions: [] };
  const problems = definitionProblems(definition).map((problem) => ({
    ...problem,
    message: problem.message.replace(/; the trigger is thread\.created$/, '; a policy sees the thread, its contact and its channel'),
  }));
  if (problems.length > 0) throw new ApiError(400, 'validation_error', "The policy's conditions do not fit their fields.", problems);
  await assertReferences(db, workspaceId, definition);
}

/** Inserts a policy at `position` (1..count+1, checked by the caller), moving the later ones down. */
export async function insertPolicy(trx: Db, workspaceId: string, fields: PolicyFields & { position: number }, now: Date): Promise<SlaPolicy> {
  await trx
    .updateTable('sla_policies')
    .set((eb) => ({ position: eb('position', '+', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>=', fields.position)
    .execute();
  const row = await trx
    .insertInto('sla_policies')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      name: normalizedName(fields.name, NAME_MAX),
      enabled: fields.enabled,
      position: fields.position,
      conditions: JSON.stringify(fields.conditions),
      targets: JSON.stringify(fields.targets),
      business_hours_only: fields.businessHoursOnly,
      human_only: fields.humanOnly,
      warn_before_minutes: fields.warnBeforeMinutes,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return policyRowToPolicy(row);
}

/** Changes a policy; a new position (1..count, checked by the caller) shifts those in between by one. */
export async function updatePolicy(
  trx: Db,
  workspaceId: string,
  current: SlaPolicyRow,
  change: Partial<PolicyFields & { position: number }>,
  now: Date,
): Promise<SlaPolicy> {
  const to = change.position ?? current.position;
  const from = current.position;
  if (to !== from) {
    await sql`
      update sla_policies
         set position = case when position < ${from}::int then position + 1 else position - 1 end, updated_at = ${now}::timestamptz
       where workspace_id = ${workspaceId}
         and position between least(${from}::int, ${to}::int) and greatest(${from}::int, ${to}::int)
         and id <> ${current.id}`.execute(trx);
  }
  const row = await trx
    .updateTable('sla_policies')
    .set({
      ...(change.name !== undefined && { name: normalizedName(change.name, NAME_MAX) }),
      ...(change.enabled !== undefined && { enabled: change.enabled }),
      ...(change.conditions !== undefined && { conditions: JSON.stringify(change.conditions) }),
      ...(change.targets !== undefined && { targets: JSON.stringify(change.targets) }),
      ...(change.businessHoursOnly !== undefined && { business_hours_only: change.businessHoursOnly }),
      ...(change.humanOnly !== undefined && { human_only: change.humanOnly }),
      ...(change.warnBeforeMinutes !== undefined && { warn_before_minutes: change.warnBeforeMinutes }),
      position: to,
      updated_at: now,
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return policyRowToPolicy(row);
}

/** Whether a change moves the due times of the clocks held to the policy: its targets, hours, warning, humanOnly, or disabling it. */
export function movesClocks(current: SlaPolicyRow, change: Partial<PolicyFields>): boolean {
  const differs = (a: unknown, b: unknown) => b !== undefined && JSON.stringify(a) !== JSON.stringify(b);
  return (
    differs(current.targets, change.targets) ||
    differs(current.business_hours_only, change.businessHoursOnly) ||
    differs(current.warn_before_minutes, change.warnBeforeMinutes) ||
    differs(current.human_only, change.humanOnly) ||
    differs(current.enabled, change.enabled)
  );
}

/** Deletes a policy and moves the later ones up. */
export async function deletePolicy(trx: Db, workspaceId: string, policy: SlaPolicyRow, now: Date): Promise<void> {
  await trx.deleteFrom('sla_policies').where('workspace_id', '=', workspaceId).where('id', '=', policy.id).execute();
  await trx
    .updateTable('sla_policies')
    .set((eb) => ({ position: eb('position', '-', 1), updated_at: now }))
    .where('workspace_id', '=', workspaceId)
    .where('position', '>', policy.position)
    .execute();
}

/**
 * The enabled policies of each workspace, in position order, their conditions compiled: read once
 * and kept, so a write path of a workspace without a policy (or whose policies did not change)
 * reads none. This process forgets a workspace's entry when it changes a policy of it
 * (forgetPolicies, after the change commits and also inside its transaction); another instance's
 * change is seen here within POLICY_CACHE_TTL_MS, the age at which an entry is read again. That is
 * the bound of a stale choice: a thread opened or regrouped on this instance during it is held to
 * the policies as they were (as a thread opened in the instant before the change is), and its
 * next opening, stage or labels change chooses again. A generation count keeps a read that began
 * before a change from storing what it read after the change forgot it.
 */
export const POLICY_CACHE_TTL_MS = 2_000;
interface CachedPolicy {
  row: SlaPolicyRow;
  conditions: ReturnType<typeof compileConditions>;
}
const policyCache = new Map<string, { at: number; policies: CachedPolicy[] }>();
let generation = 0;

/** Forgets what this process keeps of the workspace's policies (every create, update and delete calls it). */
export function forgetPolicies(workspaceId: string): void {
  generation++;
  policyCache.delete(workspaceId);
}

/** The workspace's enabled policies in position order (from the cache when it is fresh). */
export async function enabledPolicies(db: Db, workspaceId: string, now: number = Date.now()): Promise<readonly CachedPolicy[]> {
  const hit = policyCache.get(workspaceId);
  if (hit && now - hit.at < POLICY_CACHE_TTL_MS && now >= hit.at) return hit.policies;
  const started = generation;
  const rows = await db
    .selectFrom('sla_policies')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('enabled', '=', true)
    .orderBy('position')
    .execute();
  const policies = rows.map((row) => ({ row, conditions: compileConditions(row.conditions) }));
  if (started === generation) {
    if (policyCache.size >= 10_000) policyCache.delete(policyCache.keys().next().value!);
    policyCache.set(workspaceId, { at: now, policies });
  }
  return policies;
}

/** The enabled policy `id` of the workspace (the cache's; undefined when it is not among them). */
export async function enabledPolicy(db: Db, workspaceId: string, id: string | null | undefined): Promise<SlaPolicyRow | undefined> {
  if (!id) return undefined;
  return (await enabledPolicies(db, workspaceId)).find((policy) => policy.row.id === id)?.row;
}

/**
 * The policy the thread is held to now: the first enabled one, in position order, whose conditions
 * hold on the thread as it is (in the caller's transaction); undefined when none does or the
 * workspace has none. The thread, its contact and channel are read only when a policy before the
 * first one without conditions has some (a policy without conditions holds whatever the thread is),
 * and `settings` only when one of those asks whether it is business hours now.
 */
export async function choosePolicy(
  trx: Db,
  workspaceId: string,
  threadId: string,
  settings: () => Promise<Settings>,
  now: Date,
): Promise<SlaPolicyRow | undefined> {
  const policies = await enabledPolicies(trx, workspaceId);
  const asked = policies.slice(0, policies.findIndex((policy) => holdAlways(policy.conditions)) + 1 || policies.length);
  // Whether it is business hours now (it needs the settings) only when a condition to be evaluated
  // asks; otherwise none reads the context's `businessHours`.
  const hours = asked.some((policy) => readsField(policy.conditions, 'time.businessHours'));
  let context: Promise<ConditionContext | undefined> | undefined;
  for (const policy of asked) {
    if (holdAlways(policy.conditions)) return policy.row;
    context ??= threadFacts(trx, workspaceId, threadId, undefined).then(async (facts) =>
      facts && hours ? withHours(facts, await settings(), now) : facts && { ...facts, businessHours: false },
    );
    const facts = await context;
    if (!facts) return undefined;
    if (conditionsHold(policy.conditions, facts)) return policy.row;
  }
  return undefined;
}

/**
 * The policy choosePolicy chooses for any thread, when the workspace's policies tell it without the
 * thread's facts: `{ policy: undefined }` when it has no enabled policy, the first when it has no
 * conditions. Undefined when conditions are to be evaluated on the thread (choosePolicy, once it is
 * stored). A thread's opening asks it first, to store its `sla` with the thread's row.
 */
export async function policyForAnyThread(db: Db, workspaceId: string): Promise<{ policy: SlaPolicyRow | undefined } | undefined> {
  const first = (await enabledPolicies(db, workspaceId))[0];
  if (!first) return { policy: undefined };
  return holdAlways(first.conditions) ? { policy: first.row } : undefined;
}
