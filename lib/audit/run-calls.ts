import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import { InvalidCursorError } from "@/lib/idempotency/errors";

/**
 * A run's calls (one `Idemgate-Session` in one scope): its executions and suppressions merged in
 * time order, oldest first, a page at a time. Each side is read from its (session, scope, time, id)
 * index from the cursor on, so a run of 10,000 calls pages without reading the rest of the log.
 */
export interface RunCallRow {
  source: "execution" | "suppression";
  id: string;
  at: Date;
  tool: string;
  key: string;
  /** executions */
  outcome: string | null;
  durationMs: number | null;
  resultStatus: number | null;
  leaseUntil: Date | null;
  error: string | null;
  /** suppressions: replay | conflict | stuck | unknown | mismatch | fresh_key */
  kind: string | null;
  gapMs: number | null;
  originalExecutionId: string | null;
  caller: string | null;
  transport: string;
}

export interface RunCallsQuery {
  session: string;
  scope: string;
  limit: number;
  /** from a previous page's nextCursor */
  cursor?: string | null;
}

export interface RunCallsPage {
  items: RunCallRow[];
  nextCursor: string | null;
}

interface Position {
  atMs: number;
  id: string;
}

function encodeCursor(row: RunCallRow): string {
  return Buffer.from(JSON.stringify([row.at.getTime(), row.id]), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): Position {
  try {
    const [atMs, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown[];
    // a time a Date can hold (±8.64e15 ms): a larger one is no position in the log, and would not bind
    if (typeof atMs === "number" && Number.isSafeInteger(atMs) && Math.abs(atMs) <= 8.64e15 && typeof id === "string" && id.length > 0 && id.length <= 100) return { atMs, id };
  } catch {
    // below
  }
  throw new InvalidCursorError();
}

/** The page query, exposed so tests can EXPLAIN exactly what runs. */
export function runCallsSql(q: RunCallsQuery): Prisma.Sql {
  const after = q.cursor ? decodeCursor(q.cursor) : null;
  const take = q.limit + 1;
  const from = (time: string) => {
    if (!after) return Prisma.empty;
    const t = Prisma.raw(time);
    const at = new Date(after.atMs);
    // a row comparison: an index condition on (session, scope, time, id), where an OR would not be
    return Prisma.sql`AND (${t}, id) > (${at}, ${after.id})`;
  };
  return Prisma.sql`
    SELECT * FROM (
      (SELECT 'execution' AS source, id, started_at AS at, tool, key, outcome, duration_ms AS "durationMs", result_status AS "resultStatus",
        lease_until AS "leaseUntil", error, NULL::text AS kind, NULL::int AS "gapMs", NULL::text AS "originalExecutionId", caller, transport
       FROM executions WHERE session = ${q.session} AND scope = ${q.scope} ${from("started_at")}
       ORDER BY started_at, id LIMIT ${take}::int)
      UNION ALL
      (SELECT 'suppression' AS source, id, at, tool, key, NULL::text, NULL::int, NULL::int, NULL::timestamp, NULL::text, kind, gap_ms, original_execution_id,
        caller, transport
       FROM suppressions WHERE session = ${q.session} AND scope = ${q.scope} ${from("at")}
       ORDER BY at, id LIMIT ${take}::int)
    ) AS calls ORDER BY at, id LIMIT ${take}::int`;
}

export async function readRunCalls(prisma: Pick<PrismaClient, "$queryRaw">, q: RunCallsQuery): Promise<RunCallsPage> {
  const rows = await prisma.$queryRaw<RunCallRow[]>(runCallsSql(q));
  const items = rows.slice(0, q.limit);
  return { items, nextCursor: rows.length > q.limit ? encodeCursor(items[items.length - 1]) : null };
}

/** The scopes a session has calls in (at most `limit`), for an operator who named a run without its scope. */
export async function scopesOfSession(prisma: Pick<PrismaClient, "$queryRaw">, session: string, limit = 20): Promise<string[]> {
  const rows = await prisma.$queryRaw<{ scope: string }[]>`
    SELECT scope FROM (
      (SELECT DISTINCT scope FROM executions WHERE session = ${session} LIMIT ${limit}::int)
      UNION
      (SELECT DISTINCT scope FROM suppressions WHERE session = ${session} LIMIT ${limit}::int)
    ) AS s ORDER BY scope LIMIT ${limit}::int`;
  return rows.map((r) => r.scope);
}

export interface RecentRun {
  scope: string;
  session: string;
  executions: number;
  suppressions: number;
  /** executions without an outcome past their lease, or whose outcome is unknown: held for a decision */
  held: number;
  firstAt: Date;
  lastAt: Date;
}

/**
 * The sessions with calls since `since`, newest activity first, with their counts: the console's
 * Runs list (and the overview's runs with held calls, `heldOnly`). Reads the time range of the log
 * from the (started_at) and (at) indexes.
 */
export async function recentRuns(
  prisma: Pick<PrismaClient, "$queryRaw">,
  q: { since: Date; now: Date; scope?: string | null; heldOnly?: boolean; limit: number },
): Promise<RecentRun[]> {
  const scope = q.scope ? Prisma.sql`AND scope = ${q.scope}` : Prisma.empty;
  const rows = await prisma.$queryRaw<{ scope: string; session: string; executions: bigint; suppressions: bigint; held: bigint; firstAt: Date; lastAt: Date }[]>`
    SELECT scope, session, SUM(executions) AS executions, SUM(suppressions) AS suppressions, SUM(held) AS held,
      MIN(first_at) AS "firstAt", MAX(last_at) AS "lastAt"
    FROM (
      SELECT scope, session, COUNT(*) AS executions, 0 AS suppressions,
        COUNT(*) FILTER (WHERE outcome = 'unknown' OR (outcome IS NULL AND lease_until <= ${q.now})) AS held,
        MIN(started_at) AS first_at, MAX(started_at) AS last_at
      FROM executions WHERE session IS NOT NULL AND started_at >= ${q.since} ${scope} GROUP BY scope, session
      UNION ALL
      SELECT scope, session, 0, COUNT(*), 0, MIN(at), MAX(at)
      FROM suppressions WHERE session IS NOT NULL AND at >= ${q.since} ${scope} GROUP BY scope, session
    ) AS per_table
    GROUP BY scope, session
    ${q.heldOnly ? Prisma.sql`HAVING SUM(held) > 0` : Prisma.empty}
    ORDER BY MAX(last_at) DESC, scope, session LIMIT ${q.limit}::int`;
  return rows.map((r) => ({ ...r, executions: Number(r.executions), suppressions: Number(r.suppressions), held: Number(r.held) }));
}
