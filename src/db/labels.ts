// How labels are stored for the `?label=` filters: beside the labels as spelled, their keys
// `<workspace id>:<label lower-cased>`, which the GIN indexes of migration 0016 hold (it says why).
// Lower-cased here by the merge's rule, not by PostgreSQL, whose lower() depends on the database's
// locale (under LC_CTYPE=C it leaves non-ASCII letters be).

/** The key of one label (trimmed, compared ignoring case) in a workspace. */
export const labelKey = (workspaceId: string, label: string): string => `${workspaceId.toLowerCase()}:${label.trim().toLowerCase()}`;

/** The keys of labels, in their order. */
export const labelKeys = (workspaceId: string, labels: readonly string[]): string[] => labels.map((label) => labelKey(workspaceId, label));

/** The list condition "has every one of these labels" over a table with label_keys (GIN: label_keys @> keys). */
export const hasLabels = (workspaceId: string, labels: readonly string[]): readonly [string, string[]] => [
  'label_keys @> ?::text[]',
  [...new Set(labelKeys(workspaceId, labels))],
];
