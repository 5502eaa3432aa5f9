import type { Anomaly, PrismaClient } from "@/generated/prisma/client";

/** The kept arguments of one execution an anomaly is about (DESIGN.md § Arguments kept for operators). */
export interface AnomalyArguments {
  /** call: the execution the anomaly is about; original and duplicate: a fresh-key duplicate's two, or the call a stale replay answered from */
  role: "call" | "original" | "duplicate";
  executionId: string;
  /** as the execution kept them; null: its tool keeps none, or the audit retention purged them */
  value: unknown;
  kept: "redacted" | "full" | null;
}

const str = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** Which executions an anomaly's evidence names, by type. */
function executionsOf(anomaly: Pick<Anomaly, "type" | "evidence">): { role: AnomalyArguments["role"]; id: string }[] {
  const e = obj(anomaly.evidence);
  const named: { role: AnomalyArguments["role"]; id: string | null }[] =
    anomaly.type === "fresh_key_duplicate"
      ? [
          { role: "original", id: str(obj(e.original).executionId) },
          { role: "duplicate", id: str(obj(e.duplicate).executionId) },
        ]
      : anomaly.type === "stale_suppression"
        ? [{ role: "original", id: str(e.originalExecutionId) }]
        : [{ role: "call", id: str(e.executionId) }];
  return named.filter((n): n is { role: AnomalyArguments["role"]; id: string } => n.id !== null);
}

/**
 * The arguments of the executions an anomaly's evidence names, read from the audit log when the
 * anomaly is shown (so they leave with the audit retention, not with the anomaly), and only of the
 * anomaly's own scope.
 */
export async function anomalyArguments(prisma: PrismaClient, anomaly: Pick<Anomaly, "type" | "evidence" | "scope">): Promise<AnomalyArguments[]> {
  const named = executionsOf(anomaly);
  if (named.length === 0 || anomaly.scope === null) return [];
  const rows = await prisma.execution.findMany({
    where: { id: { in: named.map((n) => n.id) }, scope: anomaly.scope },
    select: { id: true, arguments: true, argumentsKept: true },
  });
  const byId = new Map(rows.map((r) => [r.id, r]));
  return named.flatMap(({ role, id }) => {
    const row = byId.get(id);
    if (!row) return [];
    const kept = row.argumentsKept === "redacted" || row.argumentsKept === "full" ? row.argumentsKept : null;
    return [{ role, executionId: id, value: row.arguments ?? null, kept }];
  });
}
