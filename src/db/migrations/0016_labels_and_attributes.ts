// Labels on contacts and threads, custom attributes on contacts, and label changes in a thread's
// history. `labels` keeps each label as first spelled (the API's value); `label_keys` holds the same
// labels as the `?label=` filter looks them up: `<workspace_id>:<label lower-cased>`, written by the
// service beside `labels` (lower-cased in Node by the rule that merges labels, so the two agree
// whatever the database's locale: PostgreSQL's lower() under LC_CTYPE=C leaves non-ASCII letters
// as they are). One GIN index over `label_keys` answers
// `label_keys @> array[...]` (every label must match: GIN intersects the keys' posting lists), and
// since each key starts with the workspace id, a key's posting list holds one workspace's rows
// only: another workspace with a million `vip` contacts costs this one nothing. The choice over
// the alternatives: a GIN index cannot lead with a uuid column without the btree_gin extension
// (which PGlite must load as a plugin), and even with it a (workspace_id, labels) GIN index keeps
// the two columns' keys apart and intersects a whole workspace's posting list with a label's over
// every workspace; a join table (workspace_id, label, contact_id) would be exact too, but is a
// second table to keep in step with every change of a contact or thread, and "all labels match"
// would be a join per label or a grouped count. The GIN indexes have fastupdate off: a label is in
// the index when its statement commits, not in a pending list that every lookup reads until
// (auto)vacuum merges it (labels change a few at a time; reads are the lists). Adding columns with constant defaults rewrites
// nothing; the checks and indexes read each table once. thread_history gains `labels` entries (the
// lists as jsonb arrays in from_labels/to_labels) and the `automation` actor. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const up_ = [
  sql`alter table contacts
        add column labels text[] not null default '{}',
        add column label_keys text[] not null default '{}',
        add column attributes jsonb not null default '{}',
        add constraint contacts_labels_check check (cardinality(labels) <= 20 and cardinality(label_keys) = cardinality(labels)),
        add constraint contacts_attributes_check check (jsonb_typeof(attributes) = 'object'),
        add constraint contacts_erased_crm_check check (erased_at is null or (labels = '{}' and attributes = '{}'))`,
  sql`create index contacts_label_keys_idx on contacts using gin (label_keys) with (fastupdate = off)`,
  sql`alter table threads
        add column labels text[] not null default '{}',
        add column label_keys text[] not null default '{}',
        add constraint threads_labels_check check (cardinality(labels) <= 20 and cardinality(label_keys) = cardinality(labels))`,
  sql`create index threads_label_keys_idx on threads using gin (label_keys) with (fastupdate = off)`,
  sql`alter table thread_history
        drop constraint thread_history_field_check,
        add constraint thread_history_field_check check (field in ('status', 'stageId', 'agentId', 'labels')),
        drop constraint thread_history_actor_type_check,
        add constraint thread_history_actor_type_check check (actor_type in ('api_key', 'agent', 'automation', 'system')),
        add column from_labels jsonb,
        add column to_labels jsonb,
        add constraint thread_history_labels_check check ((field = 'labels') = (to_labels is not null) and (field = 'labels' or from_labels is null))`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of up_) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const undo = [
    sql`delete from thread_history where field = 'labels'`,
    sql`alter table thread_history
          drop constraint thread_history_labels_check,
          drop column from_labels,
          drop column to_labels,
          drop constraint thread_history_actor_type_check,
          add constraint thread_history_actor_type_check check (actor_type in ('api_key', 'agent', 'system')),
          drop constraint thread_history_field_check,
          add constraint thread_history_field_check check (field in ('status', 'stageId', 'agentId'))`,
    sql`drop index if exists threads_label_keys_idx`,
    sql`alter table threads drop constraint threads_labels_check, drop column label_keys, drop column labels`,
    sql`drop index if exists contacts_label_keys_idx`,
    sql`alter table contacts
          drop constraint contacts_erased_crm_check,
          drop constraint contacts_attributes_check,
          drop constraint contacts_labels_check,
          drop column attributes,
          drop column label_keys,
          drop column labels`,
  ];
  for (const statement of undo) await statement.execute(db);
}
