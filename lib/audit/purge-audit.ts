import type { PrismaClient } from "@/generated/prisma/client";

export interface AuditPurgeResult {
  executions: number;
  suppressions: number;
}

/**
 * Deletes audit rows older than `olderThan` in batches (each a short statement, so the log stays
 * writable meanwhile): suppressions, and executions that have an outcome. An execution without
 * an outcome is kept whatever its age: it may be the only trace of a side effect nobody resolved.
 */
export async function purgeAuditRows(prisma: PrismaClient, olderThan: Date, batch = 5_000): Promise<AuditPurgeResult> {
  const result: AuditPurgeResult = { executions: 0, suppressions: 0 };
  for (;;) {
    const n = await prisma.$executeRaw`
      DELETE FROM suppressions WHERE id IN (SELECT id FROM suppressions WHERE at < ${olderThan}::timestamptz LIMIT ${batch})`;
    result.suppressions += n;
    if (n < batch) break;
  }
  for (;;) {
    const n = await prisma.$executeRaw`
      DELETE FROM executions WHERE id IN (
        SELECT id FROM executions WHERE started_at < ${olderThan}::timestamptz AND outcome IS NOT NULL LIMIT ${batch})`;
    result.executions += n;
    if (n < batch) break;
  }
  return result;
}
