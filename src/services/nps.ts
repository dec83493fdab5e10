// NPS: registering a thread's answer with its nps.answered event (recorded here only), and the
// arithmetic of the statistics (openapi.yaml, getNpsStats), pure so it is tested without HTTP.
import type { components } from '../../generated/api.js';
import type { Actor } from '../actor.js';
import type { Db } from '../db/database.js';
import type { NpsGroupCounts } from '../db/nps-groups.js';
import type { EventSource } from '../db/schema.js';
import { setNpsAnswer, type NpsCounts, type Thread } from '../db/threads.js';
import { recordEvent } from '../events/record.js';

export type NpsStats = components['schemas']['NpsStats'];
export type NpsGroup = components['schemas']['NpsGroup'];

/**
 * Records the thread's answer (db/threads.ts setNpsAnswer) with its nps.answered, the one emitter of
 * that type; `source` says how it came (`api`: POST /threads/{id}/nps; `conversation`: a score the
 * customer wrote, services/nps-requests.ts). Undefined when the thread is unknown or already
 * answered. Run it in a transaction.
 */
export async function answerNps(
  trx: Db,
  workspaceId: string,
  threadId: string,
  score: number,
  answeredAt: Date,
  actor: Actor,
  source: EventSource,
): Promise<Thread | undefined> {
  const answered = await setNpsAnswer(trx, workspaceId, threadId, score, answeredAt);
  if (answered) await recordEvent(trx, workspaceId, 'nps.answered', answered, actor, new Date(), { source });
  return answered;
}

/**
 * 100 x (promotores - detratores) / total, rounded to the nearest integer with halves away from
 * zero, in integer arithmetic so no half is lost to floating point; null when total is 0.
 */
export function npsScore(promotores: number, detratores: number, total: number): number | null {
  if (total === 0) return null;
  const numerator = 100 * (promotores - detratores);
  const magnitude = Math.floor((2 * Math.abs(numerator) + total) / (2 * total));
  return numerator < 0 && magnitude > 0 ? -magnitude : magnitude;
}

export function npsStats(counts: NpsCounts): NpsStats {
  const total = counts.promotores + counts.neutros + counts.detratores;
  return { ...counts, total, npsScore: npsScore(counts.promotores, counts.detratores, total) };
}

/** A group of an NPS breakdown: its key, then the same counts and arithmetic as the totals. */
export function npsGroupStats({ key, promotores, neutros, detratores }: NpsGroupCounts): NpsGroup {
  return { key, ...npsStats({ promotores, neutros, detratores }) };
}
