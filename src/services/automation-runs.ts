// An automation's run, recorded with its automation.run event (the one emitter of that type), in
// the run's transaction: the row is taken first (its unique key makes a second attempt at the same
// (automation, event) stop before acting), its outcome written when the actions are done.
import { automationActor } from '../actor.js';
import { finishRun, insertRun, type AutomationRun, type NewRun } from '../db/automation-runs.js';
import type { Db } from '../db/database.js';
import { recordEvent } from '../events/record.js';

/** Takes the run's row; undefined when the automation already ran for this trigger key. */
export function startRun(trx: Db, workspaceId: string, run: NewRun, now: Date): Promise<AutomationRun | undefined> {
  return insertRun(trx, workspaceId, run, now);
}

/** Writes the run's outcome and records automation.run, by the automation. */
export async function runRecorded(trx: Db, workspaceId: string, run: AutomationRun, now: Date): Promise<void> {
  await finishRun(trx, workspaceId, run);
  await recordEvent(trx, workspaceId, 'automation.run', run, automationActor(run.automationId, []), now);
}
