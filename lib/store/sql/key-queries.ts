import { Prisma } from "@/generated/prisma/client";
import { InvalidCursorError } from "@/lib/idempotency/errors";
import type { ListQuery } from "@/lib/idempotency/key-store";
import type { KeyState } from "@/lib/idempotency/record";
import { columnsOf, LIST, LIST_COLUMNS, ms } from "./key-rows";

/** The SQL key store's reads of many keys: list pages and counts by state (SqlKeyStore.list, counts). */

/** Rows a page holds: at least one. */
export function pageSize(limit: number): number {
  return Number.isFinite(limit) ? Math.max(1, Math.trunc(limit)) : 1;
}

/** The width of key_deadline_counts' hours, as key_counts_hour() computes them (migration 20261129030000). */
const HOUR_MS = 3_600_000n;

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b < 0n ? q - 1n : q;
}

function likePrefix(prefix: string): string {
  // LIKE's default escape character is the backslash
  return prefix.replace(/[\\%_]/g, "\\$&") + "%";
}

export interface Cursor {
  sort: number;
  scope: string;
  key: string;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.sort, c.scope, c.key]), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string): Cursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new InvalidCursorError();
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 3 ||
    !Number.isSafeInteger(parsed[0]) ||
    typeof parsed[1] !== "string" ||
    typeof parsed[2] !== "string"
  ) {
    throw new InvalidCursorError();
  }
  return { sort: parsed[0], scope: parsed[1], key: parsed[2] };
}

/** Which rows each derived state is: a range of deadline_ms within one status. */
function stateCondition(state: KeyState, now: bigint): Prisma.Sql {
  switch (state) {
    case "inflight":
      return Prisma.sql`status = 'inflight' AND deadline_ms > ${now}::bigint`;
    case "stuck":
      return Prisma.sql`status = 'inflight' AND deadline_ms <= ${now}::bigint`;
    case "unknown":
      return Prisma.sql`status = 'unknown'`;
    case "done":
      return Prisma.sql`status = 'done' AND deadline_ms > ${now}::bigint`;
    case "expired":
      return Prisma.sql`status = 'done' AND deadline_ms <= ${now}::bigint`;
  }
}

/**
 * The list query, exposed so tests can EXPLAIN exactly what runs. Newest first: by deadline
 * within a state (the state's index), by creation time otherwise; ties by (scope, key) in byte
 * order. Keyset pagination: rows strictly after the cursor, limit + 1 to see a next page.
 */
export function listSql(query: ListQuery): Prisma.Sql {
  const { sortColumn, where } = listFilter(query);
  return Prisma.sql`
    SELECT ${LIST}, ${sortColumn} AS sort_value FROM idempotency_keys ${where}
    ORDER BY ${sortColumn} DESC, scope COLLATE "C" DESC, key COLLATE "C" DESC
    LIMIT ${pageSize(query.limit) + 1}`;
}

/**
 * A key-prefix page read from the prefix's matches: the prefix index finds them all (up to
 * `narrowMatches` + 1), they are sorted, and the page's rows are read. The ordered scan of
 * listSql walks the whole time index past the keys that do not match: at 1M keys, a prefix of
 * 10,000 keys created together took 200 ms that way and 12 ms this way. `matched` (on every row)
 * says how many matches were read; past `narrowMatches` the page is incomplete, and list()
 * asks listSql instead, which finds a broad prefix's matches soon. Exposed for EXPLAIN in tests.
 */
export function prefixListSql(query: ListQuery, narrowMatches: number): Prisma.Sql {
  const { sortColumn, where } = listFilter(query);
  return Prisma.sql`
    WITH hits AS MATERIALIZED (
      SELECT scope, key, ${sortColumn} AS sort_value FROM idempotency_keys ${where} LIMIT ${narrowMatches + 1}
    ), page AS (
      SELECT scope, key, sort_value FROM hits
      ORDER BY sort_value DESC, scope COLLATE "C" DESC, key COLLATE "C" DESC
      LIMIT ${pageSize(query.limit) + 1}
    )
    SELECT ${columnsOf("k", "", LIST_COLUMNS)}, page.sort_value, (SELECT count(*) FROM hits) AS matched
    FROM page JOIN idempotency_keys k ON k.scope = page.scope AND k.key = page.key
    ORDER BY page.sort_value DESC, page.scope COLLATE "C" DESC, page.key COLLATE "C" DESC`;
}

/** The list's order column and WHERE clause (filters, and the cursor's position). */
function listFilter(query: ListQuery): { sortColumn: Prisma.Sql; where: Prisma.Sql } {
  const now = ms(query.nowMs);
  const sortColumn = Prisma.raw(query.state ? "deadline_ms" : "created_at_ms");
  const conditions: Prisma.Sql[] = [];
  if (query.state) conditions.push(stateCondition(query.state, now));
  if (query.tool !== undefined) conditions.push(Prisma.sql`tool = ${query.tool}::text`);
  if (query.scope !== undefined) conditions.push(Prisma.sql`scope = ${query.scope}::text`);
  if (query.prefix) conditions.push(Prisma.sql`key LIKE ${likePrefix(query.prefix)}::text`);
  if (query.cursor) {
    const c = decodeCursor(query.cursor);
    const sort = ms(c.sort);
    // the first comparison alone is an index bound; the second breaks ties
    conditions.push(Prisma.sql`${sortColumn} <= ${sort}::bigint AND (${sortColumn} < ${sort}::bigint
      OR (scope COLLATE "C", key COLLATE "C") < (${c.scope}::text COLLATE "C", ${c.key}::text COLLATE "C"))`);
  }
  const where = conditions.length > 0 ? Prisma.sql`WHERE ${Prisma.join(conditions, " AND ")}` : Prisma.empty;
  return { sortColumn, where };
}

/**
 * Per stored status: the total from key_counts, the rows from the hour boundary nearest to now
 * on (key_deadline_counts), and an index count of the rows between that boundary and now. Rows
 * due by now (stuck, expired) = total − from_cut + due_from_cut − live_before_cut; only one of
 * the last two is ever non-zero. Unknown rows are not split by deadline: only their total is
 * read (the other parts are skipped by a constant-false filter). The cost depends on scopes × tools and on the deadlines in one
 * half hour, not on the number of keys. Exposed for EXPLAIN in tests.
 */
export function countsSql(nowMs: number, filter: { tool?: string; scope?: string } = {}): Prisma.Sql {
  const now = ms(nowMs);
  const cutHour = floorDiv(now + HOUR_MS / 2n, HOUR_MS);
  const cut = cutHour * HOUR_MS;
  const match = (alias: string) => {
    const conditions: Prisma.Sql[] = [];
    if (filter.tool !== undefined) conditions.push(Prisma.sql` AND ${Prisma.raw(alias)}.tool = ${filter.tool}::text`);
    if (filter.scope !== undefined) conditions.push(Prisma.sql` AND ${Prisma.raw(alias)}.scope = ${filter.scope}::text`);
    return conditions.length > 0 ? Prisma.join(conditions, "") : Prisma.empty;
  };
  return Prisma.sql`
    SELECT s.status,
      (SELECT coalesce(sum(c.n), 0)::bigint FROM key_counts c WHERE c.status = s.status${match("c")}) AS total,
      (SELECT coalesce(sum(h.n), 0)::bigint FROM key_deadline_counts h
        WHERE s.split AND h.status = s.status AND h.deadline_hour >= ${cutHour}::bigint${match("h")}) AS from_cut,
      (SELECT count(*) FROM idempotency_keys k
        WHERE s.split AND k.status = s.status AND k.deadline_ms >= ${cut}::bigint AND k.deadline_ms <= ${now}::bigint${match("k")}) AS due_from_cut,
      (SELECT count(*) FROM idempotency_keys k
        WHERE s.split AND k.status = s.status AND k.deadline_ms > ${now}::bigint AND k.deadline_ms < ${cut}::bigint${match("k")}) AS live_before_cut
    FROM (VALUES ('inflight', true), ('unknown', false), ('done', true)) AS s (status, split)`;
}

