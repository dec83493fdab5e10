// One page of a list: each row carries the total as a scalar subquery over the same filters, so a
// page costs one round trip, and PostgreSQL counts from the index instead of reading every
// matching row as `count(*) over ()` would; only a page past the end asks for the count alone.
import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from './schema.js';

export interface Page<T> {
  data: T[];
  pagination: { total: number; page: number; limit: number };
}

export async function countRows<TB extends keyof Database>(query: SelectQueryBuilder<Database, TB, {}>): Promise<number> {
  const row = await query.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
  return row.n;
}

/**
 * The page of `base` (a filtered table) in the stable order of DECISIONS §5: created_at, then id,
 * oldest first unless `newestFirst`; `toApi` maps each row to its API shape.
 */
export async function listPage<TB extends keyof Database, Row, T>(
  base: SelectQueryBuilder<Database, TB, {}>,
  options: { page: number; limit: number; newestFirst?: boolean },
  toApi: (row: Row) => T,
): Promise<Page<T>> {
  const { page, limit } = options;
  const direction = options.newestFirst ? 'desc' : 'asc';
  const rows = (await base
    .selectAll()
    .select(base.select(sql<number>`count(*)::int`.as('n')).as('total_count'))
    .orderBy(sql.ref('created_at'), direction)
    .orderBy(sql.ref('id'), direction)
    .limit(limit)
    .offset((page - 1) * limit)
    .execute()) as Array<Row & { total_count: number }>;
  const total = rows[0]?.total_count ?? (page > 1 ? await countRows(base) : 0);
  return { data: rows.map(toApi), pagination: { total, page, limit } };
}
