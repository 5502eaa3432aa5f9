import { Prisma, type PrismaClient } from "@/generated/prisma/client";

const MAX_ACTORS = 500;
const MAX_ACTIONS = 100;

/**
 * The distinct values of one column, smallest first, by a loose index scan: one index probe per
 * value, so the cost follows the number of actors, not the length of the trail.
 */
function distinctSql(column: "actor" | "action", limit: number): Prisma.Sql {
  const c = Prisma.raw(column);
  return Prisma.sql`
    WITH RECURSIVE v AS (
      (SELECT ${c} AS value FROM operator_actions ORDER BY ${c} LIMIT 1)
      UNION ALL
      SELECT (SELECT ${c} FROM operator_actions WHERE ${c} > v.value ORDER BY ${c} LIMIT 1) FROM v WHERE v.value IS NOT NULL
    )
    SELECT value FROM v WHERE value IS NOT NULL LIMIT ${limit}::int`;
}

/** exposed for EXPLAIN in tests */
export function operatorActionFacetsSql() {
  return { actors: distinctSql("actor", MAX_ACTORS), actions: distinctSql("action", MAX_ACTIONS) };
}

/** The actors and actions present in the trail, for the audit page's filter menus. */
export async function operatorActionFacets(prisma: PrismaClient): Promise<{ actors: string[]; actions: string[] }> {
  const sql = operatorActionFacetsSql();
  const [actors, actions] = await Promise.all([
    prisma.$queryRaw<{ value: string }[]>(sql.actors),
    prisma.$queryRaw<{ value: string }[]>(sql.actions),
  ]);
  return { actors: actors.map((a) => a.value), actions: actions.map((a) => a.value) };
}
