import { randomUUID } from "node:crypto";
import type { Prisma, PrismaClient } from "@/generated/prisma/client";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import type { KeyStore } from "@/lib/store/key-store";
import type { SideEffect } from "@/lib/tools/effects";
import { analyzeGaps, fmt, type GapAnalysis } from "./retry-gaps";

export const ANOMALY_TYPES = [
  "orphan_unknown_outcome",
  "orphan_lost_completion",
  "orphan_late_completion",
  "orphan_unrecorded_effect",
  "stale_suppression",
] as const;
export type AnomalyType = (typeof ANOMALY_TYPES)[number];

export interface ReconcileDeps {
  prisma: PrismaClient;
  store: KeyStore;
  /** side effects the tools committed since a time (the demo tools' own tables) */
  listEffects?: (db: PrismaClient, since: Date) => Promise<SideEffect[]>;
}

export interface ReconcileOptions {
  nowMs?: number;
  /** how far back each pass looks (default 25 h: a day's TTL plus leases) */
  lookbackMs?: number;
  /** side effects younger than this are not judged yet: their intent may still be on its way (async audit) */
  effectGraceMs?: number;
  /** rows examined per check and pass */
  batch?: number;
}

export interface NewAnomaly {
  type: AnomalyType;
  dedupeKey: string;
  tool: string;
  scope: string | null;
  key: string | null;
  summary: string;
  evidence: Record<string, unknown>;
}

export interface ReconcileReport {
  examined: { executions: number; suppressions: number; effects: number };
  /** intents whose outcome was lost while the key store has their done record: outcome filled in */
  backfilled: number;
  flagged: NewAnomaly[];
  /** of those, how many were not known already */
  created: number;
}

/** A fallback (keyless, args-hash) replay later than this is a stale-suppression candidate. */
export const FALLBACK_STALE_GAP_MS = 10_000;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

async function storeRecords(store: KeyStore, pairs: { scope: string; key: string }[]): Promise<Map<string, KeyRecord | null>> {
  const out = new Map<string, KeyRecord | null>();
  for (let i = 0; i < pairs.length; i += 100) {
    const chunk = pairs.slice(i, i + 100);
    const records = await Promise.all(chunk.map((p) => store.get(p.scope, p.key)));
    chunk.forEach((p, j) => out.set(`${p.scope}\n${p.key}`, records[j]));
  }
  return out;
}

/**
 * One reconciler pass: finds the two ways an idempotency layer fails quietly and stores each
 * finding once (by its dedupe key) with its evidence.
 *
 * Orphaned side effects (it happened, or may have, with no done record):
 * - unknown outcome: an intent with no outcome whose lease has passed;
 * - lost completion: a succeeded execution whose done record is missing from the key store within its TTL;
 * - late completion: a completion refused for a stale fencing token;
 * - unrecorded effect: a side effect in a tool's own tables with no execution in the audit log.
 * Stale suppressions (a new action answered as a duplicate): a replay far outside the tool's retry
 * gaps (see retry-gaps.ts), a replay to another session than the original's, or a fallback
 * (args-hash) replay later than the tool's retry cluster.
 */
export async function reconcile(deps: ReconcileDeps, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const now = options.nowMs ?? Date.now();
  const since = new Date(now - (options.lookbackMs ?? 25 * 3_600_000));
  const batch = options.batch ?? 5_000;
  const { prisma, store } = deps;
  const flagged: NewAnomaly[] = [];
  let backfilled = 0;

  // Unknown outcomes and late completions.
  const open = await prisma.execution.findMany({
    where: { startedAt: { gte: since }, OR: [{ outcome: null, leaseUntil: { lt: new Date(now) } }, { outcome: "released" }, { outcome: "late_completion" }] },
    orderBy: { startedAt: "asc" },
    take: batch,
  });
  const openRecords = await storeRecords(store, open.filter((e) => e.outcome === null));
  for (const e of open) {
    if (e.outcome === "late_completion") {
      flagged.push({
        type: "orphan_late_completion",
        dedupeKey: `late_completion:${e.id}`,
        tool: e.tool,
        scope: e.scope,
        key: e.key,
        summary: `${e.tool} finished after its reservation was released or taken over: its side effect has no done record, and another call may have run it again`,
        evidence: { executionId: e.id, token: Number(e.token), startedAt: iso(e.startedAt), finishedAt: iso(e.finishedAt), leaseUntil: iso(e.leaseUntil), error: e.error },
      });
      continue;
    }
    const record = openRecords.get(`${e.scope}\n${e.key}`) ?? null;
    if (record && record.executionId === e.id && record.status === "done") {
      // The key store has the result: only the audit outcome was lost (a crash before the batch was written).
      await prisma.execution.update({
        where: { id: e.id },
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
      backfilled++;
      continue;
    }
    flagged.push({
      type: "orphan_unknown_outcome",
      dedupeKey: `unknown_outcome:${e.id}`,
      tool: e.tool,
      scope: e.scope,
      key: e.key,
      summary:
        e.outcome === "released"
          ? `${e.tool} started at ${e.startedAt.toISOString()} and never reported an outcome; an operator released its key, so a retry may have run the side effect a second time`
          : `${e.tool} started at ${e.startedAt.toISOString()} and never reported an outcome; its lease passed, so the side effect may or may not have happened`,
      evidence: {
        executionId: e.id,
        token: Number(e.token),
        session: e.session,
        startedAt: iso(e.startedAt),
        leaseUntil: iso(e.leaseUntil),
        keyState: record ? stateOf(record, now) : "absent",
        keyHeldBy: record?.executionId ?? null,
        releasedByOperator: e.outcome === "released" ? e.error : null,
      },
    });
  }

  // Lost completions: the execution succeeded, the key store has no done record of it within its TTL.
  const finished = await prisma.execution.findMany({
    where: { finishedAt: { gte: since }, outcome: { in: ["succeeded", "final_error", "resolved"] }, expiresAt: { gt: new Date(now) } },
    orderBy: { finishedAt: "asc" },
    take: batch,
  });
  const finishedRecords = await storeRecords(store, finished);
  for (const e of finished) {
    const record = finishedRecords.get(`${e.scope}\n${e.key}`) ?? null;
    const intact = record && record.executionId === e.id && record.status === "done" && !e.error?.startsWith("completion not stored");
    if (intact) continue;
    flagged.push({
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
        keyState: record ? stateOf(record, now) : "absent",
        keyHeldBy: record?.executionId ?? null,
        error: e.error,
      },
    });
  }

  // Side effects with no execution in the audit log.
  let effects: SideEffect[] = [];
  if (deps.listEffects) {
    const cutoff = now - (options.effectGraceMs ?? 30_000);
    effects = (await deps.listEffects(prisma, since)).filter((fx) => fx.createdAt.getTime() <= cutoff).slice(0, batch);
    const keyed = effects.filter((fx) => fx.key !== null);
    const recorded = new Set<string>();
    for (let i = 0; i < keyed.length; i += 500) {
      const chunk = keyed.slice(i, i + 500);
      const rows = await prisma.execution.findMany({
        where: { OR: chunk.map((fx) => ({ scope: fx.scope, key: fx.key!, tool: fx.tool })) },
        select: { scope: true, key: true, tool: true },
      });
      for (const r of rows) recorded.add(`${r.scope}\n${r.key}\n${r.tool}`);
    }
    for (const fx of effects) {
      if (fx.key !== null && recorded.has(`${fx.scope}\n${fx.key}\n${fx.tool}`)) continue;
      flagged.push({
        type: "orphan_unrecorded_effect",
        dedupeKey: `unrecorded_effect:${fx.tool}:${fx.effectId}`,
        tool: fx.tool,
        scope: fx.scope,
        key: fx.key,
        summary: `${fx.tool} committed ${fx.effectId} with no execution in the audit log${fx.key ? "" : " and no idempotency key"}`,
        evidence: { effectId: fx.effectId, createdAt: fx.createdAt.toISOString(), key: fx.key },
      });
    }
  }

  // Stale suppressions.
  const replays = await prisma.suppression.findMany({
    where: { at: { gte: since }, kind: "replay" },
    orderBy: { at: "asc" },
    take: batch,
  });
  const analyses = new Map<string, GapAnalysis>();
  for (const tool of new Set(replays.map((r) => r.tool))) {
    const gaps = await prisma.suppression.findMany({
      where: { tool, kind: "replay", gapMs: { not: null }, at: { gte: new Date(now - 7 * 86_400_000) } },
      select: { gapMs: true },
      orderBy: { at: "desc" },
      take: 20_000,
    });
    analyses.set(tool, analyzeGaps(gaps.map((g) => g.gapMs!)));
  }
  for (const s of replays) {
    const analysis = analyses.get(s.tool)!;
    const reasons: string[] = [];
    const gap = s.gapMs ?? 0;
    if (gap > analysis.staleThresholdMs) {
      reasons.push(`arrived ${fmt(gap)} after the original, beyond this tool's stale threshold of ${fmt(analysis.staleThresholdMs)} (${analysis.reasoning})`);
    }
    if (s.session && s.originalSession && s.session !== s.originalSession) {
      reasons.push(`answered to session ${s.session} with the result of session ${s.originalSession}`);
    }
    if (s.fallback) {
      // keyless matches are candidates past a short retry window, shorter still when the tool's
      // own gaps show where its retries end
      const fallbackLimit = analysis.firstRepeatGapMs !== null && analysis.retryClusterMaxMs !== null ? Math.min(FALLBACK_STALE_GAP_MS, Math.max(analysis.retryClusterMaxMs, 1_000)) : FALLBACK_STALE_GAP_MS;
      if (gap > fallbackLimit) reasons.push(`matched only by its arguments (no idempotency key) ${fmt(gap)} after the original, beyond the retry window of ${fmt(fallbackLimit)}`);
    }
    if (reasons.length === 0) continue;
    flagged.push({
      type: "stale_suppression",
      dedupeKey: `stale:${s.id}`,
      tool: s.tool,
      scope: s.scope,
      key: s.key,
      summary: `a ${s.tool} call was answered as a duplicate but was probably a new action: ${reasons[0]}`,
      evidence: {
        suppressionId: s.id,
        at: s.at.toISOString(),
        gapMs: s.gapMs,
        session: s.session,
        originalSession: s.originalSession,
        originalExecutionId: s.originalExecutionId,
        fallback: s.fallback,
        reasons,
        staleThresholdMs: analysis.staleThresholdMs,
        samples: analysis.samples,
      },
    });
  }

  const nowDate = new Date(now);
  const created = flagged.length
    ? await prisma.anomaly.createMany({
        data: flagged.map((a) => ({
          id: randomUUID(),
          type: a.type,
          dedupeKey: a.dedupeKey,
          tool: a.tool,
          scope: a.scope,
          key: a.key,
          status: "open",
          summary: a.summary,
          evidence: a.evidence as Prisma.InputJsonValue,
          detectedAt: nowDate,
          updatedAt: nowDate,
        })),
        skipDuplicates: true,
      })
    : { count: 0 };

  return {
    examined: { executions: open.length + finished.length, suppressions: replays.length, effects: effects.length },
    backfilled,
    flagged,
    created: created.count,
  };
}
