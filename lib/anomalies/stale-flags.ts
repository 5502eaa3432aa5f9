import type { PrismaClient } from "@/generated/prisma/client";
import { staleDedupeKey } from "./checks/stale-suppressions";

export interface StaleFlag {
  anomalyId: string;
  status: string;
}

/**
 * Which of these suppression rows the reconciler flagged as stale, with the anomaly that says so:
 * the suppression log marks and links them (one lookup by the anomalies' unique dedupe key).
 */
export async function staleFlagsFor(prisma: PrismaClient, suppressionIds: readonly string[]): Promise<Map<string, StaleFlag>> {
  if (suppressionIds.length === 0) return new Map();
  const byKey = new Map(suppressionIds.map((id) => [staleDedupeKey(id), id]));
  const rows = await prisma.anomaly.findMany({
    where: { dedupeKey: { in: [...byKey.keys()] } },
    select: { id: true, dedupeKey: true, status: true },
  });
  return new Map(rows.map((r) => [byKey.get(r.dedupeKey)!, { anomalyId: r.id, status: r.status }]));
}
