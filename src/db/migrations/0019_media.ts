// Photos, voice notes, videos, documents and stickers (issue 24). `media` holds each file's facts
// (type, MIME type, size, SHA-256, name) and where its bytes are in the media store (src/media/:
// a directory or an S3 bucket), never the bytes; an inbound file is `pending` until its job fetched
// it from Meta (`source` says where Meta has it). `contact_id` is the person whose message brought it,
// so erasing them finds their files. A message's `attachments` is what the API shows of its files
// (id, type, mimeType, size, sha256, filename, caption, status): empty for text. Frozen: add a
// migration to change it.
import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs each as a prepared statement.
const statements = [
  sql`create table media (
        workspace_id uuid not null references workspaces (id),
        id uuid not null,
        type text not null check (type in ('image', 'video', 'audio', 'document', 'sticker')),
        mime_type text not null,
        size bigint check (size >= 0),
        sha256 text check (sha256 ~ '^[0-9a-f]{64}$'),
        filename text,
        status text not null check (status in ('pending', 'stored', 'failed')),
        storage_key text,
        contact_id uuid,
        source jsonb,
        created_at timestamptz not null,
        primary key (workspace_id, id),
        foreign key (workspace_id, contact_id) references contacts (workspace_id, id),
        check ((status = 'stored') = (storage_key is not null)),
        check (status <> 'stored' or (size is not null and sha256 is not null))
      )`,
  sql`create index media_contact_idx on media (workspace_id, contact_id) where contact_id is not null`,
  sql`alter table messages add column attachments jsonb not null default '[]'::jsonb`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column attachments`.execute(db);
  await sql`drop table media`.execute(db);
}
