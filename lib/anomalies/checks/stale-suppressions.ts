import type { Suppression } from "@/generated/prisma/client";
import type { AnomalyOf } from "../anomaly-types";
import { fmt, type GapAnalysis } from "@/lib/audit/retry-gaps";
import { advance, rowsAfter, startOf } from "../scan-cursor";
import { positionOf, withArticle, type CheckContext, type CheckResult } from "./context";

/** the dedupe key of the stale-suppression anomaly about one suppression row */
export const staleDedupeKey = (suppressionId: string) => `stale:${suppressionId}`;

/**
 * Replays that were probably new actions answered as duplicates: far outside the tool's retry gaps
 * in the replay's scope (see retry-gaps.ts), or answered to another session than the original's.
 * One window judges the gap, keyed or keyless: the stale threshold of the tool's replays in that
 * scope (never under a minute, the product's own fallback-dedupe TTL), the one the evidence names. A
 * keyless (fallback-key) replay past it says so: it was matched by its arguments alone.
 */
export async function findStaleSuppressions(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("stale_suppressions"), ctx.since);
  const replays = await ctx.prisma.suppression.findMany({
    where: { kind: "replay", ...rowsAfter("at", start) },
    orderBy: [{ at: "asc" }, { id: "asc" }],
    take: ctx.batch,
  });
  const analyses = new Map<string, GapAnalysis>();
  // learnt per tool and scope (context.ts retryGapsOf): another tenant's replays change nothing here
  for (const s of replays) {
    const name = `${s.tool}\n${s.scope}`;
    if (!analyses.has(name)) analyses.set(name, await ctx.retryGaps(s.tool, s.scope));
  }
  const flagged: AnomalyOf<"stale_suppression">[] = [];
  for (const s of replays) {
    const analysis = analyses.get(`${s.tool}\n${s.scope}`)!;
    const reasons = staleReasons(s, analysis);
    if (reasons.length > 0) flagged.push(staleSuppression(s, analysis, reasons));
  }
  const next = advance(start, positionOf(replays, (s) => s.at), replays.length, ctx.batch, ctx.settledAt);
  return { examined: replays.length, flagged, cursors: { stale_suppressions: next } };
}

function staleReasons(s: Suppression, analysis: GapAnalysis): string[] {
  const reasons: string[] = [];
  const gap = s.gapMs ?? 0;
  if (gap > analysis.staleThresholdMs) {
    const how = s.fallback ? "matched only by its arguments (no idempotency key) and arrived" : "arrived";
    reasons.push(`${how} ${fmt(gap)} after the original, beyond the stale threshold of this tool's replays in this scope, ${fmt(analysis.staleThresholdMs)} (${analysis.reasoning})`);
  }
  if (s.session && s.originalSession && s.session !== s.originalSession) {
    reasons.push(`answered to session ${s.session} with the result of session ${s.originalSession}`);
  }
  return reasons;
}

export function staleSuppression(s: Suppression, analysis: GapAnalysis, reasons: string[]): AnomalyOf<"stale_suppression"> {
  return {
    type: "stale_suppression",
    dedupeKey: staleDedupeKey(s.id),
    tool: s.tool,
    scope: s.scope,
    key: s.key,
    summary: `${withArticle(s.tool)} call was answered as a duplicate but was probably a new action: ${reasons[0]}`,
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
  };
}
