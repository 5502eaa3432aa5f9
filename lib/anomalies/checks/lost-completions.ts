import type { Execution } from "@/generated/prisma/client";
import { COMPLETION_NOT_STORED } from "@/lib/idempotency/audit-port";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import type { AnomalyOf, LostCompletionRetry } from "../anomaly-types";
import { advance, rowsAfter, startOf } from "../scan-cursor";
import { iso, positionOf, recordKey, storeRecords, type CheckContext, type CheckResult } from "./context";
import { currentLossIncident, storeRestoredFindings } from "./key-store-loss";

/** A round of the lost-completion scan starts at most this often (default). */
export const LOST_COMPLETION_ROUND_MS = 15 * 60_000;

/**
 * Finished executions whose done record is missing from the key store within their TTL: a retry
 * would run the side effect again. A store can lose a record at any time (a flush, a restart
 * without persistence, a failover), so this scan re-examines every finished execution in the
 * lookback window in rounds: each pass continues after the last row it examined (by start time);
 * once a round has caught up and began at least `roundMs` ago, the next pass starts a new round
 * from the beginning of the window. Between rounds a pass reads only new rows.
 * Records lost with the store's data belong to one key-store loss incident (key-store-loss.ts).
 */
export async function findLostCompletions(
  ctx: CheckContext,
  roundMs = LOST_COMPLETION_ROUND_MS,
): Promise<CheckResult & { incident?: { dedupeKey: string; keys: { scope: string; key: string }[] } }> {
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
    if (!intact) flagged.push(lostCompletion(e, record, ctx.nowMs, await retryAnswer(ctx, e, record)));
  }
  const next = advance(start, positionOf(rows, (e) => e.startedAt), rows.length, ctx.batch, ctx.settledAt);
  const cursors = { lost_completions: { ...next, roundStartedAt } };

  // Records lost with the store's data are one incident, not one anomaly each: those whose result
  // the log gives back need nobody and are stored resolved; the others stay open per key.
  const lost = flagged.filter((a) => a.evidence.keyState === "absent" || a.evidence.retry === "restored_from_audit_log");
  if (lost.length === 0) return { examined: rows.length, flagged, cursors };
  const incident = await currentLossIncident(ctx);
  for (const a of lost) a.evidence.incident = incident;
  const restored = lost.filter((a) => a.evidence.retry === "restored_from_audit_log");
  await storeRestoredFindings(ctx, restored);
  return { examined: rows.length, flagged: flagged.filter((a) => !restored.includes(a)), cursors, incident: { dedupeKey: incident, keys: lost.map((a) => ({ scope: a.scope!, key: a.key! })) } };
}

/**
 * What a retry of the call (the same arguments) is told now, as the engine decides it: a record
 * under the key (not expired) answers it; with none, the engine gives the result back from the
 * audit log when it consults the log for the key (a store that lost data) and the log keeps the
 * result; otherwise the call runs again.
 */
async function retryAnswer(ctx: CheckContext, e: Execution, record: KeyRecord | null): Promise<LostCompletionRetry> {
  if (record && stateOf(record, ctx.nowMs) !== "expired") return "answered_by_record";
  return (await ctx.recovery.retryRestores(e.scope, e.key, e.id, ctx.nowMs)) ? "restored_from_audit_log" : "runs_again";
}

function lostCompletion(e: Execution, record: KeyRecord | null, nowMs: number, retry: LostCompletionRetry): AnomalyOf<"orphan_lost_completion"> {
  const state = record ? stateOf(record, nowMs) : "absent";
  const missing = `${e.tool} succeeded but the key store has no done record of it before ${e.expiresAt?.toISOString()}`;
  const summary =
    retry === "restored_from_audit_log"
      ? `${missing}: a retry gets its result back from the audit log (the record is restored), so the side effect does not run again`
      : retry === "answered_by_record"
        ? `${missing}: a retry is answered from the key's current record (${state}${record?.executionId && record.executionId !== e.id ? ", another execution's" : ""}), not run again`
        : `${missing}: a retry would run the side effect again${e.resultBody === null ? " (the audit log does not keep its result)" : ""}`;
  return {
    type: "orphan_lost_completion",
    dedupeKey: `lost_completion:${e.id}`,
    tool: e.tool,
    scope: e.scope,
    key: e.key,
    summary,
    evidence: {
      executionId: e.id,
      finishedAt: iso(e.finishedAt),
      expiresAt: iso(e.expiresAt),
      resultStatus: e.resultStatus,
      keyState: state,
      keyHeldBy: record?.executionId ?? null,
      error: e.error,
      retry,
    },
  };
}
