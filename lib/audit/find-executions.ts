import type { Database } from "@/lib/db/database";

/** An execution a search found, with what the console needs to link to its key. */
export interface FoundExecution {
  id: string;
  scope: string;
  key: string;
  tool: string;
  startedAt: string;
  outcome: string | null;
  /** why it matched: its id, or its kept arguments */
  matched: "id" | "arguments";
}

type Db = Pick<Database, "query">;

interface Row {
  id: string;
  scope: string;
  key: string;
  tool: string;
  started_at: Date | string;
  outcome: string | null;
}

const present = (r: Row, matched: FoundExecution["matched"]): FoundExecution => ({
  id: r.id,
  scope: r.scope,
  key: r.key,
  tool: r.tool,
  startedAt: new Date(r.started_at).toISOString(),
  outcome: r.outcome,
  matched,
});

const COLUMNS = "id, scope, key, tool, started_at, outcome";

/** The execution with this id, if it is in `scope` (every scope when undefined). */
export async function findExecutionById(db: Db, id: string, scope: string | undefined): Promise<FoundExecution | null> {
  const rows = (await db.query(`SELECT ${COLUMNS} FROM executions WHERE id = $1 AND ($2::text IS NULL OR scope = $2)`, [id, scope ?? null])) as unknown as Row[];
  return rows[0] ? present(rows[0], "id") : null;
}

/** How many matches a search reads before sorting them by time: a value almost every call has stops here. */
export const ARGUMENT_MATCHES_READ = 10_000;

/** The array of a kept call's top-level values, as execution_argument_index_values_idx indexes it. */
export const TOP_LEVEL_VALUES = `jsonb_path_query_array(arguments, '$.*')`;

/**
 * Executions whose kept arguments contain any of `documents` (JSON texts), newest first; with
 * `within: "top-level values"`, whose array of top-level values contains any of them (`["cus_42"]`:
 * the value under any name). `@>` on a GIN index (jsonb_path_ops) of execution_argument_index, the
 * copy of the kept arguments the audit writer writes one batch after the intent (argument-index.ts):
 * the time depends on the matches, not on the number of executions. The matches are read first
 * (MATERIALIZED), sorted by their start, and only the newest `limit` are joined to executions:
 * left to itself the planner walks a time index backwards hoping for 50 matches soon, which reads
 * every row when a value has none. `matches`: how many calls hold the value, counted up to
 * ARGUMENT_MATCHES_READ; `capped`: more than that hold it, and the newest of those read are shown.
 * (A copy whose execution retention deleted counts until the background pass removes it.)
 */
export async function findExecutionsByArguments(
  db: Db,
  documents: readonly string[],
  scope: string | undefined,
  limit: number,
  within: "arguments" | "top-level values" = "arguments",
): Promise<{ found: FoundExecution[]; matches: number; capped: boolean }> {
  if (documents.length === 0) return { found: [], matches: 0, capped: false };
  const { sql, params } = argumentSearchSql(documents, scope, limit, within);
  const rows = (await db.query(sql, params)) as unknown as (Row & { n: string | number })[];
  // one row more than are counted is read, so exactly ARGUMENT_MATCHES_READ is not taken for more
  const read = rows.length > 0 ? Number(rows[0].n) : 0;
  return { found: rows.map((r) => present(r, "arguments")), matches: Math.min(read, ARGUMENT_MATCHES_READ), capped: read > ARGUMENT_MATCHES_READ };
}

/** The query findExecutionsByArguments runs (lib/audit/query-plans.test.ts EXPLAINs it). */
export function argumentSearchSql(documents: readonly string[], scope: string | undefined, limit: number, within: "arguments" | "top-level values") {
  const subject = within === "arguments" ? "arguments" : TOP_LEVEL_VALUES;
  // OR of one containment per document: each is an index condition (`@> ANY(array)` would not be)
  const contains = documents.map((_, i) => `${subject} @> $${i + 4}::jsonb`).join(" OR ");
  return {
    sql: `WITH matched AS MATERIALIZED (
       SELECT execution_id, started_at FROM execution_argument_index WHERE (${contains}) AND ($1::text IS NULL OR scope = $1) LIMIT $3
     ), newest AS (
       SELECT execution_id FROM matched ORDER BY started_at DESC LIMIT $2
     )
     SELECT e.id, e.scope, e.key, e.tool, e.started_at, e.outcome, (SELECT count(*) FROM matched) AS n
     FROM newest JOIN executions e ON e.id = newest.execution_id ORDER BY e.started_at DESC`,
    params: [scope ?? null, limit, ARGUMENT_MATCHES_READ + 1, ...documents] as unknown[],
  };
}
