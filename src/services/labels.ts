// The CRM's rules for labels and custom attributes, without I/O: a label list as it is kept (NFC,
// trimmed, labels equal but for case merged into the first spelling), and a change of attributes merged into
// a contact's (null removes a key) within the limit of 50. The contract checks each label and value.
import { ApiError } from '../errors.js';
import type { ContactAttributes } from '../db/schema.js';
import { foldCase, normalizeText } from '../text.js';

/** At most this many attributes a contact keeps after a merge (the contract bounds each request). */
export const MAX_ATTRIBUTES = 50;
/** A contact's, or a thread's, labels are at most this many (the contract's bound). */
export const MAX_LABELS = 20;

/** Labels in NFC and trimmed, each once ignoring case (foldCase; the first spelling wins), in the order given. */
export function normalizeLabels(labels: readonly string[]): string[] {
  const seen = new Set<string>();
  const kept: string[] = [];
  for (const raw of labels) {
    const label = normalizeText(raw).trim();
    const key = foldCase(label);
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(label);
  }
  return kept;
}

export const sameLabels = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((label, i) => label === b[i]);

/**
 * `current` with `change` merged in: a value sets its key, null removes it, keys left out stay.
 * More than MAX_ATTRIBUTES keys in the result is the request's 400 (nothing is stored).
 */
export function mergeAttributes(current: ContactAttributes, change: Record<string, string | number | boolean | null>): ContactAttributes {
  const merged: ContactAttributes = { ...current };
  for (const [key, value] of Object.entries(change)) {
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  const count = Object.keys(merged).length;
  if (count > MAX_ATTRIBUTES) {
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path: '/body/attributes', message: `must leave the contact at most ${MAX_ATTRIBUTES} attributes (this change leaves ${count})` },
    ]);
  }
  return merged;
}

export function sameAttributes(a: ContactAttributes, b: ContactAttributes): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}
