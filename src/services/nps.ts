// NPS arithmetic (openapi.yaml, getNpsStats), pure so it is tested without HTTP.
import type { components } from '../../generated/api.js';
import type { NpsGroupCounts } from '../db/nps-groups.js';
import type { NpsCounts } from '../db/threads.js';

export type NpsStats = components['schemas']['NpsStats'];
export type NpsGroup = components['schemas']['NpsGroup'];

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
