import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import type { SuppressionKind } from "@/lib/idempotency/audit-port";

export const SUPPRESSION_KINDS: SuppressionKind[] = ["replay", "conflict", "stuck", "unknown", "mismatch", "fresh_key"];

export interface ToolActivity {
  tool: string;
  executions: number;
  suppressions: Record<SuppressionKind, number>;
  suppressionsTotal: number;
}

// Audit times are `timestamp(3)` holding UTC; an ISO string cast to timestamp drops its "Z".
const ts = (ms: number) => Prisma.sql`${new Date(ms).toISOString()}::timestamp`;

/** The two grouped counts behind recentActivity, exposed for EXPLAIN in tests. */
export function recentActivitySql(sinceMs: number) {
  return {
    executions: Prisma.sql`SELECT tool, count(*)::int AS n FROM executions WHERE started_at >= ${ts(sinceMs)} GROUP BY tool`,
    suppressions: Prisma.sql`SELECT tool, kind, count(*)::int AS n FROM suppressions WHERE at >= ${ts(sinceMs)} GROUP BY tool, kind`,
  };
}

/**
 * Executions started and suppressions answered per tool since `sinceMs` (the overview uses the
 * last hour), from the audit tables. Tools with no activity in the window are left out.
 */
export async function recentActivity(prisma: PrismaClient, sinceMs: number): Promise<ToolActivity[]> {
  const sql = recentActivitySql(sinceMs);
  const [executions, suppressions] = await Promise.all([
    prisma.$queryRaw<{ tool: string; n: number }[]>(sql.executions),
    prisma.$queryRaw<{ tool: string; kind: string; n: number }[]>(sql.suppressions),
  ]);
  const byTool = new Map<string, ToolActivity>();
  const entry = (tool: string) => {
    let a = byTool.get(tool);
    if (!a) {
      a = { tool, executions: 0, suppressions: { replay: 0, conflict: 0, stuck: 0, unknown: 0, mismatch: 0, fresh_key: 0 }, suppressionsTotal: 0 };
      byTool.set(tool, a);
    }
    return a;
  };
  for (const row of executions) entry(row.tool).executions = row.n;
  for (const row of suppressions) {
    const a = entry(row.tool);
    if ((SUPPRESSION_KINDS as string[]).includes(row.kind)) a.suppressions[row.kind as SuppressionKind] += row.n;
    a.suppressionsTotal += row.n;
  }
  return [...byTool.values()].sort((a, b) => b.executions + b.suppressionsTotal - (a.executions + a.suppressionsTotal) || a.tool.localeCompare(b.tool));
}
