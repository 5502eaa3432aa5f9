import type { PrismaClient } from "@/generated/prisma/client";

/** how many of a key's anomalies its page lists (newest first) */
export const KEY_ANOMALIES_LIMIT = 20;

export interface KeyAnomaly {
  id: string;
  type: string;
  tool: string;
  status: string;
  summary: string;
  detectedAt: Date;
}

/** The anomalies flagged about one key, newest first (the (scope, key, detected_at) index). */
export async function listKeyAnomalies(prisma: PrismaClient, scope: string, key: string, limit = KEY_ANOMALIES_LIMIT): Promise<KeyAnomaly[]> {
  return prisma.anomaly.findMany({
    where: { scope, key },
    orderBy: [{ detectedAt: "desc" }, { id: "desc" }],
    take: limit,
    select: { id: true, type: true, tool: true, status: true, summary: true, detectedAt: true },
  });
}
