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

/**
 * Executions whose kept arguments contain any of `documents` (JSON texts), newest first: `@>` on the
 * GIN index executions_arguments_path_ops_idx (jsonb_path_ops), so the time depends on the matches,
 * not on the number of executions.
 */
export async function findExecutionsByArguments(db: Db, documents: readonly string[], scope: string | undefined, limit: number): Promise<FoundExecution[]> {
  if (documents.length === 0) return [];
  // OR of one containment per document: each is an index condition (`@> ANY(array)` would not be)
  const contains = documents.map((_, i) => `arguments @> $${i + 3}::jsonb`).join(" OR ");
  const rows = (await db.query(
    `SELECT ${COLUMNS} FROM executions WHERE (${contains}) AND ($1::text IS NULL OR scope = $1) ORDER BY started_at DESC LIMIT $2`,
    [scope ?? null, limit, ...documents],
  )) as unknown as Row[];
  return rows.map((r) => present(r, "arguments"));
}

/**
 * The top-level argument names of the latest kept calls (in `scope`), which a bare search value is
 * tried under: names come from the calls themselves, so a new tool's fields are searchable at once.
 */
export async function recentArgumentNames(db: Db, scope: string | undefined, sample = 1_000, max = 40): Promise<string[]> {
  const rows = (await db.query(
    `SELECT DISTINCT name FROM (
       SELECT arguments FROM executions
       WHERE arguments IS NOT NULL AND jsonb_typeof(arguments) = 'object' AND ($1::text IS NULL OR scope = $1)
       ORDER BY started_at DESC LIMIT $2
     ) e, jsonb_object_keys(e.arguments) AS name
     ORDER BY name LIMIT $3`,
    [scope ?? null, sample, max],
  )) as { name: string }[];
  return rows.map((r) => r.name);
}
