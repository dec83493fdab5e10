// Workspace settings: the defaults every workspace starts with, loading them (the loader automations
// and NPS call), and changing them. A change records no event: none is defined for settings.
import { businessHoursProblems, isTimeZoneName } from '../business-hours.js';
import type { Db } from '../db/database.js';
import { findStoredSettings, storeSettings, type Settings, type SettingsChange } from '../db/settings.js';
import { ApiError, type ErrorDetail } from '../errors.js';

export type { Settings, SettingsChange };

const nineToSix = (): Settings['businessHours']['mon'] => [['09:00', '18:00']];

/** Freezes the object and everything in it (Object.freeze alone leaves nested arrays writable). */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const nested of Object.values(value)) deepFreeze(nested);
    Object.freeze(value);
  }
  return value;
}

/** What a workspace that never changed a setting has (openapi.yaml writes them out: GET /settings, BusinessHours, NpsSettings). */
export const DEFAULT_SETTINGS: Readonly<Settings> = deepFreeze({
  timezone: 'America/Sao_Paulo',
  businessHours: { mon: nineToSix(), tue: nineToSix(), wed: nineToSix(), thu: nineToSix(), fri: nineToSix(), sat: [], sun: [] },
  nps: {
    question: 'Em uma escala de 0 a 10, o quanto você recomendaria nosso atendimento a um amigo?',
    thanks: 'Obrigado pela sua resposta!',
    template: null,
    expiresAfterHours: 24,
  },
});

/** Every key, the workspace's own where it set one, else the default (a fresh copy the caller may change). */
export function withDefaults(stored: Partial<Settings>): Settings {
  return structuredClone({ ...DEFAULT_SETTINGS, ...stored });
}

/**
 * Every key for reading only (a run's business hours): the workspace's own keys over the frozen
 * defaults, nothing copied (withDefaults' deep copy cost an automation run more than its conditions).
 */
export function settingsToRead(stored: Partial<Settings>): Readonly<Settings> {
  return Object.keys(stored).length === 0 ? DEFAULT_SETTINGS : { ...DEFAULT_SETTINGS, ...stored };
}

/**
 * The workspace's settings, defaults included: one indexed read, no write. Load them once, then ask
 * isBusinessHours (src/business-hours.ts) or read `nps` as often as needed.
 */
export async function loadSettings(db: Db, workspaceId: string): Promise<Settings> {
  return withDefaults(await findStoredSettings(db, workspaceId));
}

/** What the contract cannot check: a time zone Intl knows, and intervals in order without overlap. */
export function settingsChangeProblems(change: SettingsChange): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  if (change.timezone !== undefined && !isTimeZoneName(change.timezone)) {
    problems.push({ path: '/body/timezone', message: 'must be an IANA time zone name, e.g. America/Sao_Paulo' });
  }
  if (change.businessHours !== undefined) {
    for (const problem of businessHoursProblems(change.businessHours)) problems.push({ path: `/body/businessHours${problem.path}`, message: problem.message });
  }
  return problems.slice(0, 20);
}

/**
 * Replaces each key the change names, whole, and answers all the settings. A change the contract
 * accepted but the rules refuse is a 400 validation_error naming each problem, and stores nothing.
 */
export async function changeSettings(db: Db, workspaceId: string, change: SettingsChange, now: Date): Promise<Settings> {
  const problems = settingsChangeProblems(change);
  if (problems.length > 0) throw new ApiError(400, 'validation_error', 'The request does not match the contract.', problems);
  return withDefaults(await storeSettings(db, workspaceId, change, now));
}
