import { Prisma } from "@/generated/prisma/client";

export interface NewestFirstPage {
  /** table and column names: constants of the caller, never input */
  table: string;
  timeColumn: string;
  columns: Prisma.Sql;
  /** column = value conditions; undefined, null and "" are left out */
  equals: Record<string, string | null | undefined>;
  /** the time column from this instant (inclusive) and before that one (exclusive) */
  from?: Date | null;
  to?: Date | null;
  /** further conditions, built by the caller from bound values */
  where?: Prisma.Sql[];
  /** the id of the previous page's last row */
  cursor?: string | null;
  limit: number;
}

/**
 * One page of an audit table, newest first, ties broken by id, fetching limit + 1 rows to know
 * whether there is a next page. The cursor row's time becomes a bound on the time column, so an
 * index on (filter column, time) or (time) serves every page, however deep.
 */
export function newestFirstPageSql(page: NewestFirstPage): Prisma.Sql {
  const time = Prisma.raw(page.timeColumn);
  const conditions: Prisma.Sql[] = [];
  for (const [column, value] of Object.entries(page.equals)) {
    if (value) conditions.push(Prisma.sql`${Prisma.raw(column)} = ${value}`);
  }
  if (page.from) conditions.push(Prisma.sql`${time} >= ${page.from}`);
  if (page.to) conditions.push(Prisma.sql`${time} < ${page.to}`);
  conditions.push(...(page.where ?? []));
  if (page.cursor) {
    const after = Prisma.sql`(SELECT ${time} FROM ${Prisma.raw(page.table)} WHERE id = ${page.cursor})`;
    conditions.push(Prisma.sql`${time} <= ${after} AND (${time} < ${after} OR id < ${page.cursor})`);
  }
  const where = conditions.length > 0 ? Prisma.sql`WHERE ${Prisma.join(conditions, " AND ")}` : Prisma.empty;
  return Prisma.sql`
    SELECT ${page.columns} FROM ${Prisma.raw(page.table)} ${where}
    ORDER BY ${time} DESC, id DESC LIMIT ${page.limit + 1}::int`;
}
