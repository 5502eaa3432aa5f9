import { Prisma, type Execution, type OperatorAction, type PrismaClient, type Suppression } from "@/generated/prisma/client";

/** newest rows kept per table for one key's timeline */
export const KEY_TRAIL_LIMIT = 500;

/**
 * The three reads behind a key's timeline, exposed so tests can EXPLAIN exactly what runs: each
 * is a backward range scan of its table's (scope, key, time) index.
 */
export function keyAuditTrailSql(scope: string, key: string, limit = KEY_TRAIL_LIMIT) {
  return {
    executions: Prisma.sql`
      SELECT id, scope, key, tool, fingerprint, token, session, caller, fallback, started_at AS "startedAt",
        lease_until AS "leaseUntil", outcome, finished_at AS "finishedAt", duration_ms AS "durationMs",
        result_status AS "resultStatus", result_body AS "resultBody", result_final AS "resultFinal", expires_at AS "expiresAt", error,
        arguments, arguments_kept AS "argumentsKept", answer_status AS "answerStatus", answer_body AS "answerBody"
      FROM executions WHERE scope = ${scope} AND key = ${key} ORDER BY started_at DESC LIMIT ${limit}::int`,
    suppressions: Prisma.sql`
      SELECT id, scope, key, tool, kind, fallback, gap_ms AS "gapMs", session, caller, original_session AS "originalSession",
        original_execution_id AS "originalExecutionId", at
      FROM suppressions WHERE scope = ${scope} AND key = ${key} ORDER BY at DESC LIMIT ${limit}::int`,
    operatorActions: Prisma.sql`
      SELECT id, actor, action, scope, key, anomaly_id AS "anomalyId", reason, state_before AS "stateBefore", state_after AS "stateAfter", at
      FROM operator_actions WHERE scope = ${scope} AND key = ${key} ORDER BY at DESC LIMIT ${limit}::int`,
  };
}

/** Everything the audit log holds about one key, newest first per table. */
export async function readKeyAuditTrail(prisma: PrismaClient, scope: string, key: string, limit = KEY_TRAIL_LIMIT) {
  const sql = keyAuditTrailSql(scope, key, limit);
  const [executions, suppressions, operatorActions] = await Promise.all([
    prisma.$queryRaw<Execution[]>(sql.executions),
    prisma.$queryRaw<Suppression[]>(sql.suppressions),
    prisma.$queryRaw<OperatorAction[]>(sql.operatorActions),
  ]);
  return { executions, suppressions, operatorActions };
}
