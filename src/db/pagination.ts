// One page of a list, answered by PostgreSQL as the response's JSON: each row of the page as a
// compact object of its API fields (`row_to_json`), in order (`array_to_json(array_agg(...))`:
// like `JSON.stringify`, neither writes spaces), and the total from a scalar `count(*)`
// subquery over the same filters. A page is one round trip and one result cell: Node neither
// parses rows and timestamps nor serialises objects on the hottest reads. The SQL of each list
// shape (which filters, which order) is written once and reused, so no query is built per request
// either. BENCHMARKS.md measures what this moves where.
import { CompiledQuery } from 'kysely';
import type { Db } from './database.js';
import type { Database } from './schema.js';

/** A response body that is already JSON text; `T` is the contract type it holds. */
export class JsonText<T> {
  declare readonly type?: T;
  constructor(readonly text: string) {}
}

export interface Page<T> {
  data: T[];
  pagination: { total: number; page: number; limit: number };
}

/** A page as JSON text, with its total at hand for the handler. */
export class PageText<T> extends JsonText<Page<T>> {
  constructor(
    text: string,
    readonly total: number,
  ) {
    super(text);
  }
}

/**
 * How a resource's API field comes from its row: a column, a `timestamptz` column written as
 * `toISOString()` writes it (UTC, milliseconds, `Z`), so lists read exactly like single reads, or
 * an SQL expression over the row `p` (a constant of the code, never input).
 */
export type Field = string | { instant: string } | { sql: string };

/** A table listed as API objects of type `T`. */
export interface ListSource<T> {
  readonly table: keyof Database;
  /** The API fields of one row of `p`: `p.column as "apiField"`, ... */
  readonly fields: string;
  /** The columns of the list order, ties broken by the last (created_at, id unless told). */
  readonly order: readonly string[];
  /** The SQL text of each list shape, by filters and order. */
  readonly texts: Map<string, string>;
  readonly type?: T;
}

/**
 * One filter of a list: a condition over the table's columns with `?` standing for its value
 * (every `?` of one condition is the same value). The SQL is a constant of the code, never input.
 */
export type Condition = readonly [sql: string, value: unknown];

const ISO_INSTANT = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

function plainName(text: string): string {
  if (!/^[a-zA-Z_]+$/.test(text)) throw new Error(`not a plain name: ${text}`);
  return text;
}

function fieldSql(field: Field): string {
  if (typeof field === 'string') return `p.${plainName(field)}`;
  if ('instant' in field) return `to_char(p.${plainName(field.instant)} at time zone 'UTC', ${ISO_INSTANT})`;
  return field.sql;
}

/**
 * `table` listed with every field of `T` (a missing one fails the type check), ordered by
 * `options.order` (default created_at, then id).
 */
export function listSource<T>(table: keyof Database, fields: { [K in keyof Required<T>]: Field }, options: { order?: readonly string[] } = {}): ListSource<T> {
  const columns = Object.entries<Field>(fields).map(([key, field]) => `${fieldSql(field)} as "${plainName(key)}"`);
  const order = (options.order ?? ['created_at', 'id']).map(plainName);
  return { table, fields: columns.join(', '), order, texts: new Map() };
}

function listText(source: ListSource<unknown>, where: readonly Condition[], direction: 'asc' | 'desc', matchesFirst: boolean): string {
  const key = `${direction}${matchesFirst ? ' matches first' : ''} ${where.map(([condition]) => condition).join(' and ')}`;
  let text = source.texts.get(key);
  if (text === undefined) {
    const filters = where.map(([condition], i) => condition.replaceAll('?', `$${i + 1}`)).join(' and ');
    const order = (alias: string): string => source.order.map((column) => `${alias}${column} ${direction}`).join(', ');
    const [limit, offset] = [`$${where.length + 1}`, `$${where.length + 2}`];
    // OFFSET 0 keeps the matches' subquery apart, so the page's ORDER BY ... LIMIT cannot lead the
    // planner to walk the order's index and filter (see listPage's matchesFirst).
    const matches = matchesFirst ? `(select * from ${source.table} where ${filters} offset 0) as m` : `${source.table} where ${filters}`;
    text =
      `select (select count(*)::int from ${source.table} where ${filters}) as total, ` +
      `(select coalesce(array_to_json(array_agg(row_to_json(x) order by ${order('p.')})), '[]')::text ` +
      `from (select * from ${matches} order by ${order('')} limit ${limit} offset ${offset}) as p, ` +
      `lateral (select ${source.fields}) as x) as data`;
    source.texts.set(key, text);
  }
  return text;
}

/**
 * The page of `source` matching every condition of `where`, in the source's stable order
 * (created_at, then id, unless the source says otherwise), oldest first unless `newestFirst`.
 * `matchesFirst`: find every match by the filters' own indexes, then order them, for filters whose
 * matches the planner cannot count ahead (a label rarer than its statistics see): otherwise it may
 * walk the order's index through a whole workspace, filtering, to fill one page. The page then
 * costs in proportion to the matches, as the total's count already does.
 */
export async function listPage<T>(
  db: Db,
  source: ListSource<T>,
  where: readonly Condition[],
  options: { page: number; limit: number; newestFirst?: boolean; matchesFirst?: boolean },
): Promise<PageText<T>> {
  const { page, limit } = options;
  const text = listText(source, where, options.newestFirst ? 'desc' : 'asc', options.matchesFirst ?? false);
  const parameters = [...where.map(([, value]) => value), limit, (page - 1) * limit];
  const { rows } = await db.executeQuery<{ total: number; data: string }>(CompiledQuery.raw(text, parameters));
  const { total, data } = rows[0]!;
  return new PageText(`{"data":${data},"pagination":{"total":${total},"page":${page},"limit":${limit}}}`, total);
}
