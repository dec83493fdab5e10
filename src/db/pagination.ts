// One page of a list: the rows carry their total in a window count, so a page costs one query;
// only a page past the end (no rows to carry it) asks for the count separately.
import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from './schema.js';

export interface Page<T> {
  data: T[];
  pagination: { total: number; page: number; limit: number };
}

/** `count(*) over ()`: the number of rows matching the query before LIMIT/OFFSET. */
export const totalCount = () => sql<number>`(count(*) over ())::int`.as('total_count');

export async function countRows<TB extends keyof Database>(query: SelectQueryBuilder<Database, TB, {}>): Promise<number> {
  const row = await query.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
  return row.n;
}

export async function pageOf<R extends { total_count: number }, T, TB extends keyof Database>(
  rows: R[],
  toApi: (row: R) => T,
  page: number,
  limit: number,
  base: SelectQueryBuilder<Database, TB, {}>,
): Promise<Page<T>> {
  const total = rows[0]?.total_count ?? (page > 1 ? await countRows(base) : 0);
  return { data: rows.map(toApi), pagination: { total, page, limit } };
}
