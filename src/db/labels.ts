// How labels are stored for the `?label=` filters: beside the labels as spelled, their keys
// `<workspace id>:<label case-folded>`, which the GIN indexes of migration 0016 hold (it says why).
// Folded here by the merge's rule (src/text.ts's foldCase, over the label in NFC), not by
// PostgreSQL, whose lower() depends on the database's locale (under LC_CTYPE=C it leaves non-ASCII
// letters be). Keys written before that fold were recomputed by migration 0024.
import { foldCase } from '../text.js';

/** The key of one label (NFC, trimmed, compared ignoring case) in a workspace. */
export const labelKey = (workspaceId: string, label: string): string => `${workspaceId.toLowerCase()}:${foldCase(label.trim())}`;

/** The keys of labels, in their order. */
export const labelKeys = (workspaceId: string, labels: readonly string[]): string[] => labels.map((label) => labelKey(workspaceId, label));

/** The list condition "has every one of these labels" over a table with label_keys (GIN: label_keys @> keys). */
export const hasLabels = (workspaceId: string, labels: readonly string[]): readonly [string, string[]] => [
  'label_keys @> ?::text[]',
  [...new Set(labelKeys(workspaceId, labels))],
];
