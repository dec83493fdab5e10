// Workspace settings: the keys a workspace set (time zone, business hours, NPS), one row per
// workspace that changed any. Defaults are not stored: a key never set is absent here and
// services/settings.ts answers its default.
import type { Selectable } from 'kysely';
import type { components } from '../../generated/api.js';
import type { Db } from './database.js';
import type { WorkspaceSettingsTable } from './schema.js';

export type Settings = components['schemas']['Settings'];
export type SettingsChange = components['schemas']['SettingsPatch'];
type Row = Selectable<WorkspaceSettingsTable>;
type Hours = Settings['businessHours'];
type Nps = Settings['nps'];

/** The keys the row holds, in the API's shape and order (jsonb keeps keys in an order of its own). */
export function rowToStoredSettings(row: Pick<Row, 'timezone' | 'business_hours' | 'nps'> | undefined): Partial<Settings> {
  const stored: Partial<Settings> = {};
  if (!row) return stored;
  if (row.timezone !== null) stored.timezone = row.timezone;
  if (row.business_hours !== null) {
    const h = row.business_hours as Hours;
    stored.businessHours = { mon: h.mon, tue: h.tue, wed: h.wed, thu: h.thu, fri: h.fri, sat: h.sat, sun: h.sun };
  }
  if (row.nps !== null) {
    const n = row.nps as Nps;
    stored.nps = {
      question: n.question,
      thanks: n.thanks,
      template: n.template && { name: n.template.name, language: n.template.language },
      expiresAfterHours: n.expiresAfterHours,
    };
  }
  return stored;
}

/** The keys the workspace set; none (`{}`) when it never changed its settings. */
export async function findStoredSettings(db: Db, workspaceId: string): Promise<Partial<Settings>> {
  const row = await db.selectFrom('workspace_settings').selectAll().where('workspace_id', '=', workspaceId).executeTakeFirst();
  return rowToStoredSettings(row);
}

/**
 * Sets the keys the change names, whole, and leaves the others (one statement: concurrent changes of
 * different keys both land). Answers every key the workspace has now set.
 */
export async function storeSettings(db: Db, workspaceId: string, change: SettingsChange, now: Date): Promise<Partial<Settings>> {
  const values = {
    ...(change.timezone !== undefined && { timezone: change.timezone }),
    ...(change.businessHours !== undefined && { business_hours: JSON.stringify(change.businessHours) }),
    ...(change.nps !== undefined && { nps: JSON.stringify(change.nps) }),
    updated_at: now,
  };
  const row = await db
    .insertInto('workspace_settings')
    .values({ workspace_id: workspaceId, ...values })
    .onConflict((oc) => oc.column('workspace_id').doUpdateSet(values))
    .returningAll()
    .executeTakeFirstOrThrow();
  return rowToStoredSettings(row);
}
