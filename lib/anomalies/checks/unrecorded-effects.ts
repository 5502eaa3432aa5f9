import type { ListEffects, SideEffect } from "@/lib/tools/effects";
import type { AnomalyOf } from "../anomaly-types";
import { advance, comparePositions, startOf, type Position } from "../scan-cursor";
import type { CheckContext, CheckResult } from "./context";

/** A side effect's place in the scan: its time, then its tool and id (unique across tools). */
const positionOfEffect = (fx: SideEffect): Position => ({ at: fx.createdAt, id: `${fx.tool}:${fx.effectId}` });

/**
 * Side effects in the tools' own tables (of the tools that can list theirs) with no execution in
 * the audit log: something ran the action without going through Idemgate, or its intent was lost
 * (async audit mode). Effects younger than `graceMs` are not judged yet: their intent may still be
 * on its way.
 */
export async function findUnrecordedEffects(ctx: CheckContext, listEffects: ListEffects, graceMs: number): Promise<CheckResult> {
  const start = startOf(ctx.cursor("unrecorded_effects"), ctx.since);
  const cutoff = ctx.nowMs - graceMs;
  const effects = (await listEffects(ctx.prisma, start.at))
    .filter((fx) => fx.createdAt.getTime() <= cutoff && comparePositions(positionOfEffect(fx), start) > 0)
    .sort((a, b) => comparePositions(positionOfEffect(a), positionOfEffect(b)))
    .slice(0, ctx.batch);

  const keyed = effects.filter((fx) => fx.key !== null);
  const recorded = new Set<string>();
  for (let i = 0; i < keyed.length; i += 500) {
    const chunk = keyed.slice(i, i + 500);
    const rows = await ctx.prisma.execution.findMany({
      where: { OR: chunk.map((fx) => ({ scope: fx.scope, key: fx.key!, tool: fx.tool })) },
      select: { scope: true, key: true, tool: true },
    });
    for (const r of rows) recorded.add(`${r.scope}\n${r.key}\n${r.tool}`);
  }
  const flagged = effects.filter((fx) => fx.key === null || !recorded.has(`${fx.scope}\n${fx.key}\n${fx.tool}`)).map(unrecordedEffect);

  const last = effects.length ? positionOfEffect(effects[effects.length - 1]) : null;
  // the grace is this scan's settling time: nothing younger was read
  const next = advance(start, last, effects.length, ctx.batch, new Date(cutoff));
  return { examined: effects.length, flagged, cursors: { unrecorded_effects: next } };
}

function unrecordedEffect(fx: SideEffect): AnomalyOf<"orphan_unrecorded_effect"> {
  return {
    type: "orphan_unrecorded_effect",
    dedupeKey: `unrecorded_effect:${fx.tool}:${fx.effectId}`,
    tool: fx.tool,
    scope: fx.scope,
    key: fx.key,
    summary: `${fx.tool} committed ${fx.effectId} with no execution in the audit log${fx.key ? "" : " and no idempotency key"}`,
    evidence: { effectId: fx.effectId, createdAt: fx.createdAt.toISOString(), key: fx.key },
  };
}
