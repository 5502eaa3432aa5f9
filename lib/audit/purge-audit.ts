import type { PrismaClient } from "@/generated/prisma/client";

export interface AuditPurgeResult {
  executions: number;
  suppressions: number;
  /** rows of the tool-stats rollups folded away (their half hours' figures are unchanged) */
  rollupRows: number;
  /** arguments kept for resend probes (lib/tools/resend-log.ts) of calls sent before the cut-off */
  resendArguments: number;
  /** executions kept past the cut-off (no outcome yet) whose kept arguments and service answer were dropped */
  keptArguments: number;
}

/**
 * Deletes audit rows older than `olderThan` in batches (each a short statement, so the log stays
 * writable meanwhile): suppressions, and executions that have an outcome. An execution without
 * an outcome is kept whatever its age: it may be the only trace of a side effect nobody resolved.
 *
 * The tool-stats rollups (tool_stats_half_hours) follow every deletion through their triggers, so
 * the console's figures always match the rows left; afterwards the rollup rows of the half hours
 * before `olderThan` are folded into one per tool and half hour, and dropped where nothing is left.
 */
export async function purgeAuditRows(prisma: PrismaClient, olderThan: Date, batch = 5_000): Promise<AuditPurgeResult> {
  const result: AuditPurgeResult = { executions: 0, suppressions: 0, rollupRows: 0, resendArguments: 0, keptArguments: 0 };
  for (;;) {
    const n = await prisma.$executeRaw`
      DELETE FROM suppressions WHERE id IN (SELECT id FROM suppressions WHERE at < (${olderThan}::timestamptz AT TIME ZONE 'UTC') LIMIT ${batch})`;
    result.suppressions += n;
    if (n < batch) break;
  }
  for (;;) {
    // with the search's copy of their arguments (lib/audit/argument-index.ts), in the same statement
    const [{ n }] = await prisma.$queryRaw<{ n: number }[]>`
      WITH gone AS (
        DELETE FROM executions WHERE id IN (
          SELECT id FROM executions WHERE started_at < (${olderThan}::timestamptz AT TIME ZONE 'UTC') AND outcome IS NOT NULL LIMIT ${batch})
        RETURNING id
      ), unindexed AS (
        DELETE FROM execution_argument_index WHERE execution_id IN (SELECT id FROM gone)
      )
      SELECT count(*)::int AS n FROM gone`;
    result.executions += n;
    if (n < batch) break;
  }
  // a call's arguments live no longer than its audit trail, even while its outcome is unknown:
  // an execution kept for want of an outcome keeps its fingerprint, not its arguments
  for (;;) {
    // with the search's copy of them (lib/audit/argument-index.ts), in the same statement
    const [{ n }] = await prisma.$queryRaw<{ n: number }[]>`
      WITH cleared AS (
        UPDATE executions SET arguments = NULL, arguments_kept = NULL, answer_body = NULL, answer_status = NULL WHERE id IN (
          SELECT id FROM executions WHERE started_at < (${olderThan}::timestamptz AT TIME ZONE 'UTC')
            AND (arguments IS NOT NULL OR answer_body IS NOT NULL) LIMIT ${batch})
        RETURNING id
      ), unindexed AS (
        DELETE FROM execution_argument_index WHERE execution_id IN (SELECT id FROM cleared)
      )
      SELECT count(*)::int AS n FROM cleared`;
    result.keptArguments += n;
    if (n < batch) break;
  }
  for (;;) {
    const n = await prisma.$executeRaw`
      DELETE FROM upstream_resends WHERE execution_id IN (
        SELECT execution_id FROM upstream_resends WHERE sent_at < (${olderThan}::timestamptz AT TIME ZONE 'UTC') LIMIT ${batch})`;
    result.resendArguments += n;
    if (n < batch) break;
  }
  const [folded] = await prisma.$queryRaw<{ n: number }[]>`SELECT tool_stats_compact(${olderThan.toISOString()}::timestamp) AS n`;
  result.rollupRows = folded.n;
  return result;
}
