// Automations as runs use them: conditions compiled (values folded, lists made sets) once per
// automation version (id and updatedAt), kept in a cache bounded in bytes. An event's run lists
// its automations' versions alone, and loads and compiles only those the cache lacks, a few per
// statement, yielding to the event loop between them: a workspace of max-size automations costs
// its first event some statements, never one long hold of the loop or one huge row.
import { loadRunnableAutomations, runnableOf, type AutomationHead, type AutomationVersion, type RunnableAutomation } from '../db/automation-runs.js';
import { findAutomation, MAX_DEFINITION_BYTES } from '../db/automations.js';
import type { Db } from '../db/database.js';
import { compileConditions, type CompiledConditions } from './conditions.js';
import { definitionBytes, type Definition } from './validate.js';

export interface PreparedAutomation {
  id: string;
  actions: Definition['actions'];
  conditions: CompiledConditions;
}

/** How many automations the cache keeps at most, counted by the size of their definitions. */
const CACHE_BYTES = 32 * 1024 * 1024;
/** How many definitions one statement loads at most. */
const LOAD_BATCH = 8;

/** `fits`: the definition is within MAX_DEFINITION_BYTES (known once a timer's run loaded it whole). */
const cache = new Map<string, { prepared: PreparedAutomation; bytes: number; fits?: boolean }>();
let cachedBytes = 0;

/** Versions over the size bound (their definitions never loaded), remembered so that each event's run does not ask again: bounded, cleared when full. */
const oversize = new Set<string>();
const MAX_OVERSIZE = 10_000;

/** A version's time as JSON text, parsed once (an event's run lists every enabled automation's version): bounded, cleared when full. */
const parsedTimes = new Map<string, number>();
const MAX_PARSED_TIMES = 10_000;

function timeOf(updatedAt: Date | string): number {
  if (updatedAt instanceof Date) return updatedAt.getTime();
  let time = parsedTimes.get(updatedAt);
  if (time === undefined) {
    time = new Date(updatedAt).getTime();
    if (parsedTimes.size >= MAX_PARSED_TIMES) parsedTimes.clear();
    parsedTimes.set(updatedAt, time);
  }
  return time;
}

const versionKey = (id: string, updatedAt: Date | string): string => `${id}@${timeOf(updatedAt)}`;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** An automation as loaded, prepared (from the cache when this version is in it). */
export function prepare(automation: RunnableAutomation): PreparedAutomation {
  const key = versionKey(automation.id, automation.updated_at);
  const hit = cache.get(key);
  if (hit) return hit.prepared;
  const prepared = { id: automation.id, actions: automation.actions, conditions: compileConditions(automation.conditions, automation.folded) };
  const bytes = JSON.stringify(automation.conditions).length + JSON.stringify(automation.actions).length;
  cache.set(key, { prepared, bytes });
  cachedBytes += bytes;
  for (const [oldest, entry] of cache) {
    if (cachedBytes <= CACHE_BYTES) break;
    cache.delete(oldest);
    cachedBytes -= entry.bytes;
  }
  return prepared;
}

/**
 * The automations of `versions`, in their order, prepared: those the cache lacks are loaded
 * LOAD_BATCH at a time (a version changed since it was listed loads as it is now; one deleted
 * since is left out) and compiled one at a time between yields. One over the size bound is left
 * out too (it runs no more until changed to fit), and its version remembered as such.
 */
export async function prepareAll(db: Db, workspaceId: string, versions: readonly AutomationVersion[]): Promise<PreparedAutomation[]> {
  const keys = versions.map((v) => versionKey(v.id, v.updated_at));
  const missing = versions.filter((_, i) => !cache.has(keys[i]!) && !oversize.has(keys[i]!)).map((v) => v.id);
  const loaded = new Map<string, PreparedAutomation>();
  for (let i = 0; i < missing.length; i += LOAD_BATCH) {
    const rows = await loadRunnableAutomations(db, workspaceId, missing.slice(i, i + LOAD_BATCH));
    for (const row of rows) {
      if (!row.fits) {
        if (oversize.size >= MAX_OVERSIZE) oversize.clear();
        oversize.add(versionKey(row.id, row.updated_at));
        continue;
      }
      loaded.set(row.id, prepare(row));
      await yieldToLoop();
    }
  }
  return versions.flatMap((v, i) => {
    const prepared = loaded.get(v.id) ?? cache.get(keys[i]!)?.prepared;
    return prepared ? [prepared] : [];
  });
}

/** A timer's automation as its run uses it: its version's `enabled` and trigger, whether its definition is within the bound, and it prepared. */
export interface TimerAutomation {
  enabled: boolean;
  trigger: AutomationHead['trigger'];
  fits: boolean;
  prepared: PreparedAutomation;
}

/**
 * The automation of a timer whose run read `head` (its version): from the cache when that version
 * is in it with its bound checked, else loaded whole (as it is now: a version changed since the
 * head was read loads as it is) and remembered. Undefined when it was deleted meanwhile.
 */
export async function timerAutomation(db: Db, workspaceId: string, head: AutomationHead): Promise<TimerAutomation | undefined> {
  const hit = cache.get(versionKey(head.id, head.updated_at));
  if (hit?.fits !== undefined) return { enabled: head.enabled, trigger: head.trigger, fits: hit.fits, prepared: hit.prepared };
  const row = await findAutomation(db, workspaceId, head.id);
  if (!row) return undefined;
  const prepared = prepare(runnableOf(row));
  const fits = definitionBytes(row) <= MAX_DEFINITION_BYTES;
  const entry = cache.get(versionKey(row.id, row.updated_at));
  if (entry) entry.fits = fits;
  return { enabled: row.enabled, trigger: row.trigger, fits, prepared };
}
