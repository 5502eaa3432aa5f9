import type { Execution } from "@/generated/prisma/client";
import { PASS_THROUGH_PREFIX } from "@/lib/idempotency/key-rules";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import { plainCallerText } from "@/lib/notifications/caller-text";
import type { AnomalyOf } from "../anomaly-types";
import { advance, rowsAfter, startOf } from "../scan-cursor";
import { iso, positionOf, recordKey, storeRecords, type CheckContext, type CheckResult } from "./context";

/**
 * Calls whose side effect may or may not have happened, with no decision about their key yet:
 * - reported: the call ended saying it cannot tell (outcome `unknown`, with its note), flagged at once;
 * - silent: an intent with no outcome whose lease passed (a crash). When the key store has its
 *   result, only the audit outcome was lost (a crash before the batch was written): it is filled in.
 * Calls an operator (or a probe) already decided are not flagged: released and resolved ones are
 * no longer open.
 */
export async function findUnknownOutcomes(ctx: CheckContext): Promise<CheckResult> {
  const reported = await scanReported(ctx);
  const silent = await scanSilent(ctx);
  return {
    examined: reported.examined + silent.examined,
    flagged: [...reported.flagged, ...silent.flagged],
    backfilled: silent.backfilled,
    cursors: { ...reported.cursors, ...silent.cursors },
  };
}

/**
 * Pass-through calls (reads the log records, under keys of their own) hold no key: whatever became
 * of one, calling again is the caller's business, and nothing waits for a decision.
 */
const HOLDS_A_KEY = { NOT: { key: { startsWith: PASS_THROUGH_PREFIX } } };

async function scanReported(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("unknown_outcomes"), ctx.since);
  const rows = await ctx.prisma.execution.findMany({
    where: { outcome: "unknown", leaseUntil: { gte: ctx.since }, ...rowsAfter("finishedAt", start), ...HOLDS_A_KEY },
    orderBy: [{ finishedAt: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const records = await storeRecords(ctx.store, rows);
  const flagged = rows.map((e) => unknownOutcome(e, records.get(recordKey(e)) ?? null, ctx.nowMs, "reported"));
  const next = advance(start, positionOf(rows, (e) => e.finishedAt!), rows.length, ctx.batch, ctx.settledAt);
  return { examined: rows.length, flagged, cursors: { unknown_outcomes: next } };
}

async function scanSilent(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("silent_executions"), ctx.since);
  const rows = await ctx.prisma.execution.findMany({
    where: { outcome: null, AND: [{ leaseUntil: { lt: new Date(ctx.nowMs) } }, rowsAfter("leaseUntil", start)], ...HOLDS_A_KEY },
    orderBy: [{ leaseUntil: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const records = await storeRecords(ctx.store, rows);
  const flagged: AnomalyOf<"orphan_unknown_outcome">[] = [];
  let backfilled = 0;
  for (const e of rows) {
    const record = records.get(recordKey(e)) ?? null;
    if (record && record.executionId === e.id && record.status === "done") {
      await backfillOutcome(ctx, e, record);
      backfilled++;
      continue;
    }
    flagged.push(unknownOutcome(e, record, ctx.nowMs, "silent"));
  }
  const next = advance(start, positionOf(rows, (e) => e.leaseUntil), rows.length, ctx.batch, ctx.settledAt);
  return { examined: rows.length, flagged, backfilled, cursors: { silent_executions: next } };
}

/** The key store has the result: only the audit outcome was lost. */
async function backfillOutcome(ctx: CheckContext, e: Execution, record: KeyRecord): Promise<void> {
  await ctx.prisma.execution.updateMany({
    // only while it is still open: an outcome written meanwhile wins
    where: { id: e.id, outcome: null },
    data: {
      outcome: record.result?.final ? "final_error" : "succeeded",
      finishedAt: record.completedAtMs ? new Date(record.completedAtMs) : null,
      resultStatus: record.result?.status ?? null,
      resultBody: record.result?.body ?? null,
      resultFinal: record.result?.final ?? null,
      expiresAt: record.expiresAtMs ? new Date(record.expiresAtMs) : null,
      error: "outcome filled in by the reconciler from the key store",
    },
  });
}

function unknownOutcome(e: Execution, record: KeyRecord | null, nowMs: number, cause: "reported" | "silent"): AnomalyOf<"orphan_unknown_outcome"> {
  return {
    type: "orphan_unknown_outcome",
    dedupeKey: `unknown_outcome:${e.id}`,
    tool: e.tool,
    scope: e.scope,
    key: e.key,
    summary:
      cause === "reported"
        ? `${e.tool} ended without knowing whether its side effect happened (${e.error === null ? "no note" : `its note: \u201c${plainCallerText(e.error, 300)}\u201d`}); its key is held until the tool's status probe or an operator decides`
        : `${e.tool} started at ${e.startedAt.toISOString()} and never reported an outcome; its lease passed, so the side effect may or may not have happened`,
    evidence: {
      executionId: e.id,
      token: Number(e.token),
      session: e.session,
      startedAt: e.startedAt.toISOString(),
      leaseUntil: e.leaseUntil.toISOString(),
      cause,
      note: cause === "reported" ? e.error : null,
      unknownAt: cause === "reported" ? iso(e.finishedAt) : null,
      keyState: record ? stateOf(record, nowMs) : "absent",
      keyHeldBy: record?.executionId ?? null,
    },
  };
}
