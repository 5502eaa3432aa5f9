import type { PrismaClient } from "@/generated/prisma/client";
import type { SuppressionKind } from "@/lib/idempotency/audit-port";

export const SUPPRESSION_KINDS: SuppressionKind[] = ["replay", "conflict", "stuck", "mismatch"];

export interface ToolActivity {
  tool: string;
  executions: number;
  suppressions: Record<SuppressionKind, number>;
  suppressionsTotal: number;
}

/**
 * Executions started and suppressions answered per tool since `sinceMs` (the overview uses the
 * last hour), from the audit tables. Tools with no activity in the window are left out.
 */
export async function recentActivity(prisma: PrismaClient, sinceMs: number): Promise<ToolActivity[]> {
  const since = new Date(sinceMs);
  const [executions, suppressions] = await Promise.all([
    prisma.execution.groupBy({ by: ["tool"], where: { startedAt: { gte: since } }, _count: { _all: true } }),
    prisma.suppression.groupBy({ by: ["tool", "kind"], where: { at: { gte: since } }, _count: { _all: true } }),
  ]);
  const byTool = new Map<string, ToolActivity>();
  const entry = (tool: string) => {
    let a = byTool.get(tool);
    if (!a) {
      a = { tool, executions: 0, suppressions: { replay: 0, conflict: 0, stuck: 0, mismatch: 0 }, suppressionsTotal: 0 };
      byTool.set(tool, a);
    }
    return a;
  };
  for (const row of executions) entry(row.tool).executions = row._count._all;
  for (const row of suppressions) {
    const a = entry(row.tool);
    if ((SUPPRESSION_KINDS as string[]).includes(row.kind)) a.suppressions[row.kind as SuppressionKind] += row._count._all;
    a.suppressionsTotal += row._count._all;
  }
  return [...byTool.values()].sort((a, b) => b.executions + b.suppressionsTotal - (a.executions + a.suppressionsTotal) || a.tool.localeCompare(b.tool));
}
