import type { Execution } from "@/generated/prisma/client";
import type { AnomalyOf } from "../anomaly-types";
import { advance, rowsAfter, startOf } from "../scan-cursor";
import { iso, positionOf, type CheckContext, type CheckResult } from "./context";

/**
 * Completions refused for a stale fencing token: the call finished after its reservation was
 * released or taken over, so its side effect has no done record and another call may have run it
 * again.
 */
export async function findLateCompletions(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("late_completions"), ctx.since);
  const rows = await ctx.prisma.execution.findMany({
    where: { outcome: "late_completion", leaseUntil: { gte: ctx.since }, ...rowsAfter("finishedAt", start) },
    orderBy: [{ finishedAt: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const next = advance(start, positionOf(rows, (e) => e.finishedAt!), rows.length, ctx.batch, ctx.settledAt);
  return { examined: rows.length, flagged: rows.map(lateCompletion), cursors: { late_completions: next } };
}

function lateCompletion(e: Execution): AnomalyOf<"orphan_late_completion"> {
  return {
    type: "orphan_late_completion",
    dedupeKey: `late_completion:${e.id}`,
    tool: e.tool,
    scope: e.scope,
    key: e.key,
    summary: `${e.tool} finished after its reservation was released or taken over: its side effect has no done record, and another call may have run it again`,
    evidence: {
      executionId: e.id,
      token: Number(e.token),
      startedAt: e.startedAt.toISOString(),
      finishedAt: iso(e.finishedAt),
      leaseUntil: e.leaseUntil.toISOString(),
      error: e.error,
    },
  };
}
