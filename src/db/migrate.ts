// Applies pending migrations; Kysely's Migrator holds a PostgreSQL advisory lock while it runs,
// so instances starting together apply each migration exactly once.
import { Migrator, type Migration, type MigrationResultSet } from 'kysely/migration';
import type { Kysely } from 'kysely';
import * as m0001 from './migrations/0001_initial.js';
import * as m0002 from './migrations/0002_nps_daily.js';
import * as m0003 from './migrations/0003_channels_and_jobs.js';
import * as m0004 from './migrations/0004_funnel_and_crm.js';
import * as m0005 from './migrations/0005_idempotency_keys.js';
import * as m0006 from './migrations/0006_events_and_webhooks.js';
import * as m0007 from './migrations/0007_ai_agents.js';
import * as m0008 from './migrations/0008_claim_jobs_function.js';
import * as m0009 from './migrations/0009_idempotency_keys_without_foreign_key.js';
import * as m0010 from './migrations/0010_one_channel_per_meta_account.js';
import * as m0011 from './migrations/0011_sealed_idempotency_results.js';
import * as m0012 from './migrations/0012_jobs_of_no_workspace.js';
import * as m0013 from './migrations/0013_event_actors.js';
import * as m0014 from './migrations/0014_event_stream.js';
import * as m0015 from './migrations/0015_human_agents.js';
import * as m0016 from './migrations/0016_labels_and_attributes.js';
import * as m0017 from './migrations/0017_workspace_settings.js';
import * as m0018 from './migrations/0018_stream_listeners.js';
import * as m0019 from './migrations/0019_media.js';
import * as m0020 from './migrations/0020_automations.js';
import * as m0021 from './migrations/0021_all_keys_gain_new_scopes.js';
import * as m0022 from './migrations/0022_automation_runs.js';
import * as m0023 from './migrations/0023_nps_requests.js';
import * as m0024 from './migrations/0024_labels_folded_in_nfc.js';
import * as m0025 from './migrations/0025_automation_bounds.js';
import * as m0027 from './migrations/0027_contact_identity.js';
import * as m0028 from './migrations/0028_service_levels.js';
import * as m0029 from './migrations/0029_conversation.js';
import * as m0030 from './migrations/0030_stream_consumer.js';
import * as m0032 from './migrations/0032_response_time_rollups.js';
import * as m0033 from './migrations/0033_claim_jobs_plan_cached.js';
import * as m0034 from './migrations/0034_reaction_ids.js';
import * as m0035 from './migrations/0035_contacts_by_username.js';

/** Every migration by name, in order; the names are what kysely_migration records. */
export const migrations: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_nps_daily': m0002,
  '0003_channels_and_jobs': m0003,
  '0004_funnel_and_crm': m0004,
  '0005_idempotency_keys': m0005,
  '0006_events_and_webhooks': m0006,
  '0007_ai_agents': m0007,
  '0008_claim_jobs_function': m0008,
  '0009_idempotency_keys_without_foreign_key': m0009,
  '0010_one_channel_per_meta_account': m0010,
  '0011_sealed_idempotency_results': m0011,
  '0012_jobs_of_no_workspace': m0012,
  '0013_event_actors': m0013,
  '0014_event_stream': m0014,
  '0015_human_agents': m0015,
  '0016_labels_and_attributes': m0016,
  '0017_workspace_settings': m0017,
  '0018_stream_listeners': m0018,
  '0019_media': m0019,
  '0020_automations': m0020,
  '0021_all_keys_gain_new_scopes': m0021,
  '0022_automation_runs': m0022,
  '0023_nps_requests': m0023,
  '0024_labels_folded_in_nfc': m0024,
  '0025_automation_bounds': m0025,
  '0027_contact_identity': m0027,
  '0028_service_levels': m0028,
  '0029_conversation': m0029,
  '0030_stream_consumer': m0030,
  '0032_response_time_rollups': m0032,
  '0033_claim_jobs_plan_cached': m0033,
  '0034_reaction_ids': m0034,
  '0035_contacts_by_username': m0035,
};

function createMigrator(db: Kysely<any>): Migrator {
  return new Migrator({ db, provider: { getMigrations: () => Promise.resolve(migrations) } });
}

/** Migrates to the latest version; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const result: MigrationResultSet = await createMigrator(db).migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName;
    throw new Error(`migration ${failed ?? '(setup)'} failed: ${String((result.error as Error).message ?? result.error)}`, {
      cause: result.error,
    });
  }
  return (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
