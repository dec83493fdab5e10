// An automation's run, recorded with its automation.run event (the one emitter of that type), in
// the run's transaction and in one statement: no row and no event when the automation already ran
// for this trigger key (the unique index of migration 0022 decides, also between two instances).
import { sql } from 'kysely';
import { automationActor } from '../actor.js';
import { insertRunQuery, type AutomationRun } from '../db/automation-runs.js';
import type { Db } from '../db/database.js';
import { recordChangeEvent } from '../events/record.js';

/**
 * Records the run and its automation.run, by the automation; false when it already ran for
 * `keys.trigger` (nothing is written). `atCommit`: the statement travels with the transaction's
 * next one or its COMMIT (runAtCommit), and a run already there fails it instead, with 22012
 * (division by zero), so the whole transaction rolls back as a lost claim's does.
 */
export function recordRun(
  trx: Db,
  workspaceId: string,
  run: AutomationRun,
  keys: { trigger: string; root: string },
  { atCommit = false } = {},
): Promise<boolean> {
  const data = sql`${JSON.stringify(run)}::jsonb as data, null::uuid as contact_id`;
  return recordChangeEvent(
    trx,
    workspaceId,
    'automation.run',
    {
      with: insertRunQuery(workspaceId, run, keys),
      source: atCommit ? sql`select ${data} where 1 / (select count(*)::int from run) = 1` : sql`select ${data} from run`,
    },
    automationActor(run.automationId, [], null),
    new Date(run.createdAt),
    { withNext: atCommit },
  );
}
