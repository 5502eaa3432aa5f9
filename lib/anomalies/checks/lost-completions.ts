import type { Execution } from "@/generated/prisma/client";
import { COMPLETION_NOT_STORED } from "@/lib/idempotency/audit-port";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import type { AnomalyOf } from "../anomaly-types";
import { advance, rowsAfter, startOf } from "../scan-cursor";
import { iso, positionOf, recordKey, storeRecords, type CheckContext, type CheckResult } from "./context";

/** A round of the lost-completion scan starts at most this often (default). */
export const LOST_COMPLETION_ROUND_MS = 15 * 60_000;

/**
 * Finished executions whose done record is missing from the key store within their TTL: a retry
 * would run the side effect again. A store can lose a record at any time (a flush, a restart
 * without persistence, a failover), so this scan re-examines every finished execution in the
 * lookback window in rounds: each pass continues after the last row it examined (by start time);
 * once a round has caught up and began at least `roundMs` ago, the next pass starts a new round
 * from the beginning of the window. Between rounds a pass reads only new rows.
 */
export async function findLostCompletions(ctx: CheckContext, roundMs = LOST_COMPLETION_ROUND_MS): Promise<CheckResult> {
  const stored = ctx.cursor("lost_completions");
  const now = new Date(ctx.nowMs);
  const newRound = !stored?.roundStartedAt || (stored.caughtUp && ctx.nowMs - stored.roundStartedAt.getTime() >= roundMs);
  const roundStartedAt = newRound ? now : stored!.roundStartedAt!;
  const start = newRound ? startOf(undefined, ctx.since) : startOf(stored, ctx.since);
  const rows = await ctx.prisma.execution.findMany({
    where: {
      outcome: { in: ["succeeded", "final_error", "resolved"] },
      expiresAt: { gt: now },
      AND: [{ startedAt: { lte: now } }, rowsAfter("startedAt", start)],
    },
    orderBy: [{ startedAt: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const records = await storeRecords(ctx.store, rows);
  const flagged: AnomalyOf<"orphan_lost_completion">[] = [];
  for (const e of rows) {
    const record = records.get(recordKey(e)) ?? null;
    const intact = record && record.executionId === e.id && record.status === "done" && !e.error?.startsWith(COMPLETION_NOT_STORED);
    if (!intact) flagged.push(lostCompletion(e, record, ctx.nowMs));
  }
  const next = advance(start, positionOf(rows, (e) => e.startedAt), rows.length, ctx.batch, ctx.settledAt);
  return { examined: rows.length, flagged, cursors: { lost_completions: { ...next, roundStartedAt } } };
}

function lostCompletion(e: Execution, record: KeyRecord | null, nowMs: number): AnomalyOf<"orphan_lost_completion"> {
  return {
    type: "orphan_lost_completion",
    dedupeKey: `lost_completion:${e.id}`,
    tool: e.tool,
    scope: e.scope,
    key: e.key,
    summary: `${e.tool} succeeded but the key store has no done record of it before ${e.expiresAt?.toISOString()}: a retry would run the side effect again`,
    evidence: {
      executionId: e.id,
      finishedAt: iso(e.finishedAt),
      expiresAt: iso(e.expiresAt),
      resultStatus: e.resultStatus,
      keyState: record ? stateOf(record, nowMs) : "absent",
      keyHeldBy: record?.executionId ?? null,
      error: e.error,
    },
  };
}
