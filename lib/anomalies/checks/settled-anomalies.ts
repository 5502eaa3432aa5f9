import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import { rowsAfter, startOf, type ScanCursor } from "../scan-cursor";
import { recordKey, storeRecords, type CheckContext } from "./context";
import { RECONCILER_ACTOR } from "./probe-keys";

/**
 * Per-key anomalies that wait for a decision about their key's call: an unknown outcome waits for
 * a probe or an operator, a lost completion for its result to be under its key again.
 */
export const KEY_DECISION_ANOMALIES = ["orphan_unknown_outcome", "orphan_lost_completion"] as const;

/**
 * Open anomalies whose key no longer needs anyone: the call was decided (released, resolved,
 * retried) or completed after all, or the key is done with the call's result (restored from the
 * audit log after a key-store loss). A decision closes its key's anomalies itself; this catches
 * those it missed (an anomaly stored just after the decision, by another process; a decision whose
 * process stopped before it closed them). Each is resolved with the reason in the operator trail,
 * the reconciler as actor. Goes round all open ones, `batch` per pass, like held calls.
 */
export async function closeSettledAnomalies(ctx: CheckContext): Promise<{ examined: number; closed: number; cursor: ScanCursor }> {
  const start = startOf(ctx.cursor("settled_anomalies"), new Date(0));
  const rows = await ctx.prisma.anomaly.findMany({
    where: { status: "open", type: { in: [...KEY_DECISION_ANOMALIES] }, scope: { not: null }, key: { not: null }, ...rowsAfter("detectedAt", start) },
    select: { id: true, type: true, scope: true, key: true, evidence: true, detectedAt: true },
    orderBy: [{ detectedAt: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const executionIds = rows.map((r) => executionOf(r.evidence)).filter((id): id is string => id !== null);
  const executions = new Map(
    (await ctx.prisma.execution.findMany({ where: { id: { in: executionIds } }, select: { id: true, outcome: true } })).map((e) => [e.id, e.outcome]),
  );
  const records = await storeRecords(ctx.store, rows.map((r) => ({ scope: r.scope!, key: r.key! })));
  let closed = 0;
  for (const row of rows) {
    const executionId = executionOf(row.evidence);
    if (!executionId) continue;
    const reason = settledBecause(row.type, executionId, executions.get(executionId), records.get(recordKey({ scope: row.scope!, key: row.key! })) ?? null, ctx.nowMs);
    if (!reason) continue;
    // conditional on its status, so an operator changing it at the same moment is not overwritten
    const out = await ctx.prisma.anomaly.updateMany({ where: { id: row.id, status: "open" }, data: { status: "resolved", updatedAt: new Date(ctx.nowMs) } });
    if (out.count === 0) continue;
    await recordOperatorAction(ctx.prisma, {
      actor: RECONCILER_ACTOR,
      action: "resolve_anomaly",
      reason,
      scope: row.scope,
      key: row.key,
      anomalyId: row.id,
      before: { status: "open", type: row.type },
      after: { status: "resolved", type: row.type, settled: true },
    });
    closed++;
  }
  const full = rows.length >= ctx.batch;
  const last = rows[rows.length - 1];
  const cursor: ScanCursor = full && last ? { at: last.detectedAt, id: last.id, caughtUp: false, roundStartedAt: null } : { at: new Date(0), id: "", caughtUp: true, roundStartedAt: null };
  return { examined: rows.length, closed, cursor };
}

function executionOf(evidence: unknown): string | null {
  const id = (evidence as { executionId?: unknown } | null)?.executionId;
  return typeof id === "string" ? id : null;
}

/** Why an anomaly about this execution needs nobody any more, or null while it still does. */
export function settledBecause(type: string, executionId: string, outcome: string | null | undefined, record: KeyRecord | null, nowMs: number): string | null {
  const state = record ? stateOf(record, nowMs) : "absent";
  if (type === "orphan_lost_completion") {
    // its result is under its key again (a retry, or the reconciler, restored it from the log)
    if (record && record.executionId === executionId && state === "done") return "the key's done record holds this execution's result again: duplicates are answered with it";
    return null;
  }
  switch (outcome) {
    case "released":
    case "resolved":
    case "retried":
      return `its call was ${outcome} (the audit log records the decision)`;
    case "succeeded":
    case "final_error":
    case "late_completion":
      return `its call reported its outcome after all (${outcome.replace("_", " ")})`;
    case "failed":
      return "its call reported that nothing happened";
  }
  if (record && state === "done") {
    return record.executionId === executionId
      ? "the key is done with its call's result: duplicates are answered with it"
      : "the key is done with another execution's result: its call no longer holds it";
  }
  return null;
}
