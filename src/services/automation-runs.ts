// An automation's run, recorded with its automation.run event (the one emitter of that type), in
// the run's transaction and in one statement: no row and no event when the automation already ran
// for this trigger key (the unique index of migration 0022 decides, also between two instances).
import { sql } from 'kysely';
import { automationActor } from '../actor.js';
import { insertRunQuery, runValues, type AutomationRun, type RunValues } from '../db/automation-runs.js';
import type { Db } from '../db/database.js';
import { placeholder } from '../events/fan-out.js';
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
  const values = runValues(run, keys);
  const inputs = Object.fromEntries(Object.entries(values).map(([field, value]) => [`run.${field}`, value]));
  return recordChangeEvent(
    trx,
    workspaceId,
    'automation.run',
    atCommit ? RECORDED_AT_COMMIT : RECORDED,
    automationActor(run.automationId, [], null),
    new Date(run.createdAt),
    {
      withNext: atCommit,
      shape: atCommit ? 'run-at-commit' : 'run',
      inputs: { ...inputs, 'run.data': JSON.stringify(run) },
    },
  );
}

/** The run's statement with placeholders of its values (`run.<field>` of RunValues, `run.data` its JSON), compiled once per shape. */
const RUN_FIELDS = {
  id: true,
  automationId: true,
  eventId: true,
  threadId: true,
  status: true,
  reason: true,
  actions: true,
  createdAt: true,
  triggerKey: true,
  rootKey: true,
} satisfies Record<keyof RunValues, true>;
const RUN = Object.fromEntries(Object.keys(RUN_FIELDS).map((field) => [field, placeholder(`run.${field}`)])) as Record<keyof RunValues, string>;
const RUN_DATA = sql`${placeholder('run.data')}::jsonb as data, null::uuid as contact_id`;
const INSERT_RUN = insertRunQuery(placeholder('workspaceId'), RUN);
const RECORDED = { with: INSERT_RUN, source: sql`select ${RUN_DATA} from run` };
// No row to insert (the run is there already) fails the statement: 22012, division by zero.
const RECORDED_AT_COMMIT = { with: INSERT_RUN, source: sql`select ${RUN_DATA} where 1 / (select count(*)::int from run) = 1` };
