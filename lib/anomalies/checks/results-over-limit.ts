import { Prisma } from "@/generated/prisma/client";
import { OVER_LIMIT_PREFIX } from "@/lib/idempotency/scope-result-limit";
import type { AnomalyOf } from "../anomaly-types";
import { advance, startOf } from "../scan-cursor";
import { positionOf, type CheckContext, type CheckResult } from "./context";

interface Row {
  id: string;
  scope: string;
  key: string;
  tool: string;
  finished_at: Date;
  result_body: string;
}

// written into the query as it is in the partial index executions_result_over_limit_idx (migration
// 20261206010000), so the planner reads that index: a few rows, whatever the size of the log
const OVER_LIMIT = Prisma.raw(`'${OVER_LIMIT_PREFIX.replace(/'/g, "''")}%'`);

/**
 * Completions stored as a placeholder because their tenant's stored results were over the limit
 * (lib/idempotency/scope-result-limit.ts): the call is done, its result is not kept. One finding per
 * scope and day (the first such completion's), not one per key: the tenant is what needs a look.
 */
export async function findResultsOverLimit(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("results_over_limit"), ctx.since);
  const rows = await ctx.prisma.$queryRaw<Row[]>`
    SELECT id, scope, key, tool, finished_at, result_body FROM executions
    WHERE result_body LIKE ${OVER_LIMIT} AND (finished_at, id) > (${start.at}, ${start.id})
    ORDER BY finished_at, id LIMIT ${ctx.batch}`;
  const next = advance(start, positionOf(rows, (e) => e.finished_at), rows.length, ctx.batch, ctx.settledAt);
  return { examined: rows.length, flagged: rows.map(overLimit), cursors: { results_over_limit: next } };
}

function overLimit(e: Row): AnomalyOf<"result_over_scope_limit"> {
  const detail = (JSON.parse(e.result_body) as { idemgate: { resultBytes?: number; scopeResultBytesLimit?: number } }).idemgate;
  const day = e.finished_at.toISOString().slice(0, 10);
  return {
    type: "result_over_scope_limit",
    dedupeKey: `result_over_scope_limit:${e.scope}:${day}`,
    tool: e.tool,
    scope: e.scope,
    // about the tenant, not one key (whose call is done): nothing on the key is left to decide
    key: null,
    summary: `scope ${e.scope} holds its limit of stored result bytes: results of its calls are stored as placeholders (${e.tool}, first on ${day}); the calls are done and never run again, their duplicates are answered with the placeholder`,
    evidence: {
      executionId: e.id,
      key: e.key,
      finishedAt: e.finished_at.toISOString(),
      resultBytes: detail.resultBytes ?? null,
      limitBytes: detail.scopeResultBytesLimit ?? null,
    },
  };
}
