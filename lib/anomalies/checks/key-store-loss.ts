import { randomUUID } from "node:crypto";
import { Prisma } from "@/generated/prisma/client";
import type { AnomalyOf, KeyStoreLossEvidence, LossNotRestored } from "../anomaly-types";
import type { CheckContext } from "./context";

/** Records a key-store loss incident lists by key at most; the rest are in the anomaly list. */
export const LOSS_LISTED = 50;

/** What a key-store loss incident names as its tool: it is about the store, not one tool. */
export const KEY_STORE_TOOL = "key store";

/**
 * The key-store loss incident new findings belong to: the one still open (or acknowledged), else
 * a new one. Operators resolve an incident once they have dealt with it; a loss after that is a new one.
 */
export async function currentLossIncident(ctx: CheckContext): Promise<string> {
  const open = await ctx.prisma.anomaly.findFirst({
    where: { type: "key_store_loss", status: { in: ["open", "acknowledged"] } },
    orderBy: { detectedAt: "desc" },
    select: { dedupeKey: true },
  });
  return open?.dedupeKey ?? `key_store_loss:${ctx.nowMs}`;
}

/**
 * Lost completions a retry gets back from the audit log need nobody: stored already resolved (the
 * key's page still shows them), counted in their incident. Returns how many were new.
 */
export async function storeRestoredFindings(ctx: CheckContext, findings: AnomalyOf<"orphan_lost_completion">[]): Promise<number> {
  if (findings.length === 0) return 0;
  const at = new Date(ctx.nowMs);
  const out = await ctx.prisma.anomaly.createMany({
    data: findings.map((a) => ({
      id: randomUUID(),
      type: a.type,
      dedupeKey: a.dedupeKey,
      tool: a.tool,
      scope: a.scope,
      key: a.key,
      status: "resolved",
      summary: a.summary,
      evidence: a.evidence as unknown as Prisma.InputJsonValue,
      detectedAt: at,
      updatedAt: at,
    })),
    skipDuplicates: true,
  });
  return out.count;
}

/**
 * The incident as its findings now stand: how many records were lost in it, how many the log
 * restores, which not. Updated in place when it exists; returned as a new finding otherwise (stored
 * like every other, so its webhook event goes out once).
 */
export async function lossIncident(ctx: CheckContext, dedupeKey: string, keys: { scope: string; key: string }[]): Promise<AnomalyOf<"key_store_loss"> | null> {
  const [counts] = await ctx.prisma.$queryRaw<{ records: number; restored: number }[]>`
    SELECT count(*)::int AS records, (count(*) FILTER (WHERE evidence->>'retry' = 'restored_from_audit_log'))::int AS restored
    FROM anomalies WHERE type = 'orphan_lost_completion' AND evidence->>'incident' = ${dedupeKey}`;
  const notRestoredRows = await ctx.prisma.$queryRaw<{ scope: string; key: string; executionId: string; retry: string }[]>`
    SELECT scope, key, evidence->>'executionId' AS "executionId", coalesce(evidence->>'retry', 'runs_again') AS retry
    FROM anomalies WHERE type = 'orphan_lost_completion' AND evidence->>'incident' = ${dedupeKey}
      AND coalesce(evidence->>'retry', '') <> 'restored_from_audit_log'
    ORDER BY detected_at, id LIMIT ${LOSS_LISTED}`;
  const existing = await ctx.prisma.anomaly.findUnique({ where: { dedupeKey }, select: { id: true, evidence: true } });
  const before = (existing?.evidence ?? null) as Partial<KeyStoreLossEvidence> | null;
  const now = new Date(ctx.nowMs).toISOString();
  const since = await storeEpoch(ctx, keys);
  const evidence: KeyStoreLossEvidence = {
    firstFoundAt: before?.firstFoundAt ?? now,
    lastFoundAt: now,
    storeHoldsDataSince: [before?.storeHoldsDataSince ?? null, since].filter((t): t is string => t !== null).sort()[0] ?? null,
    records: counts.records,
    restored: counts.restored,
    notRestored: counts.records - counts.restored,
    notRestoredKeys: notRestoredRows.map((r) => ({ scope: r.scope, key: r.key, executionId: r.executionId, retry: r.retry as LossNotRestored["retry"] })),
  };
  const summary =
    evidence.notRestored === 0
      ? `The key store lost ${evidence.records} done record${evidence.records === 1 ? "" : "s"}; the audit log restores all of them: retries get their results back and nothing runs again`
      : `The key store lost ${evidence.records} done record${evidence.records === 1 ? "" : "s"}; the audit log restores ${evidence.restored}, ${evidence.notRestored} need${evidence.notRestored === 1 ? "s" : ""} a person (each an open anomaly)`;
  if (existing) {
    await ctx.prisma.anomaly.update({ where: { id: existing.id }, data: { evidence: evidence as unknown as Prisma.InputJsonValue, summary, updatedAt: new Date(ctx.nowMs) } });
    return null;
  }
  return { type: "key_store_loss", dedupeKey, tool: KEY_STORE_TOOL, scope: null, key: null, summary, evidence };
}

/** The earliest time the store says the parts holding these keys have data since (a few keys asked). */
async function storeEpoch(ctx: CheckContext, keys: { scope: string; key: string }[]): Promise<string | null> {
  if (!ctx.store.epochOf) return null;
  const epochs = await Promise.all(keys.slice(0, 10).map((k) => ctx.store.epochOf!(k.scope, k.key).catch(() => null)));
  const known = epochs.filter((e): e is number => e !== null);
  return known.length ? new Date(Math.min(...known)).toISOString() : null;
}
