// Labels are now kept in NFC and compared by Unicode case folding (src/text.ts's foldCase) rather
// than by toLowerCase: the labels of contacts and threads are written again in NFC, twins that the
// new rule finds equal (an NFD and an NFC spelling, `Straße` and `STRASSE`) merged into the first
// spelling, and their `label_keys` (`<workspace id>:<folded label>`, which the GIN indexes of
// migration 0016 hold) recomputed, so `?label=` finds what the new rule says. Rows whose labels and
// keys are already right are not written. Batches of rows in key order, one UPDATE each; the GIN
// indexes stay as they are and take the new keys as rows change. The fold is copied here as it is
// today: a migration is frozen in time. Frozen: add a migration to change it.
import { sql, type Kysely } from 'kysely';

const BATCH = 1_000;

type Fold = (text: string) => string;

/** Unicode full case folding over NFC, as src/text.ts's foldCase does it. */
const foldCase: Fold = (text) => text.normalize('NFC').toUpperCase().toLowerCase().replace(/ς/g, 'σ').replace(/ß/g, 'ss').normalize('NFC');
/** The fold before: lower case. */
const lowerCase: Fold = (text) => text.toLowerCase();

/** A row's labels in NFC, trimmed, each once by `fold` (the first spelling wins), with their keys. */
function relabel(fold: Fold, workspaceId: string, labels: readonly string[]): { labels: string[]; keys: string[] } {
  const seen = new Set<string>();
  const kept: string[] = [];
  const keys: string[] = [];
  for (const raw of labels) {
    const label = raw.normalize('NFC').trim();
    const folded = fold(label);
    if (seen.has(folded)) continue;
    seen.add(folded);
    kept.push(label);
    keys.push(`${workspaceId.toLowerCase()}:${folded}`);
  }
  return { labels: kept, keys };
}

interface LabelledRow {
  workspace_id: string;
  id: string;
  labels: string[];
  label_keys: string[];
}

const same = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((value, i) => value === b[i]);

async function relabelTable(db: Kysely<any>, table: 'contacts' | 'threads', fold: Fold): Promise<void> {
  let after: { workspace_id: string; id: string } | undefined;
  for (;;) {
    const { rows } = await sql<LabelledRow>`
      select workspace_id, id, labels, label_keys from ${sql.table(table)}
       where labels <> '{}' ${after ? sql`and (workspace_id, id) > (${after.workspace_id}::uuid, ${after.id}::uuid)` : sql``}
       order by workspace_id, id
       limit ${BATCH}`.execute(db);
    if (rows.length === 0) return;
    const changed = rows.flatMap((row) => {
      const next = relabel(fold, row.workspace_id, row.labels);
      return same(next.labels, row.labels) && same(next.keys, row.label_keys) ? [] : [{ workspace_id: row.workspace_id, id: row.id, ...next }];
    });
    if (changed.length > 0) {
      await sql`
        update ${sql.table(table)} t
           set labels = array(select e from jsonb_array_elements_text(u.labels) with ordinality as l (e, n) order by n),
               label_keys = array(select e from jsonb_array_elements_text(u.keys) with ordinality as k (e, n) order by n)
          from jsonb_to_recordset(${JSON.stringify(changed)}::jsonb) as u (workspace_id uuid, id uuid, labels jsonb, keys jsonb)
         where t.workspace_id = u.workspace_id and t.id = u.id`.execute(db);
    }
    const last = rows[rows.length - 1]!;
    after = { workspace_id: last.workspace_id, id: last.id };
  }
}

export async function up(db: Kysely<any>): Promise<void> {
  await relabelTable(db, 'contacts', foldCase);
  await relabelTable(db, 'threads', foldCase);
}

/** The keys lower-cased again, as the code before looks them up; merged twins stay merged (which was which is not kept). */
export async function down(db: Kysely<any>): Promise<void> {
  await relabelTable(db, 'contacts', lowerCase);
  await relabelTable(db, 'threads', lowerCase);
}
