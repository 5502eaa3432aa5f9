import type { PrismaClient } from "@/generated/prisma/client";
import type { ToolPause } from "@/lib/idempotency/paused-tools";

type Db = Pick<PrismaClient, "pausedTool">;

/** The paused_tools table: what every server process reads to refuse paused tools' new calls. */
export async function readPausedTools(db: Db): Promise<ToolPause[]> {
  const rows = await db.pausedTool.findMany({ orderBy: { tool: "asc" } });
  return rows.map((r) => ({ tool: r.tool, reason: r.reason, actor: r.actor, pausedAtMs: r.pausedAt.getTime(), source: "operator" as const }));
}

export async function readPausedTool(db: Db, tool: string): Promise<ToolPause | null> {
  const r = await db.pausedTool.findUnique({ where: { tool } });
  return r ? { tool: r.tool, reason: r.reason, actor: r.actor, pausedAtMs: r.pausedAt.getTime(), source: "operator" } : null;
}
