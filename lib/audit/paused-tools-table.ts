import type { PrismaClient } from "@/generated/prisma/client";
import type { Database } from "@/lib/db/database";
import type { ToolPause } from "@/lib/idempotency/paused-tools";

type Db = Pick<PrismaClient, "pausedTool">;

// paused_at is a timestamp without time zone holding UTC (as Prisma writes it): its epoch is UTC's
const PAUSED_TOOLS = `SELECT tool, reason, actor, (extract(epoch from paused_at) * 1000)::float8 AS paused_at_ms FROM paused_tools ORDER BY tool`;

/**
 * The paused_tools table: what every server process reads, four times a second, to refuse paused
 * tools' new calls. Straight through the driver as a prepared statement: through Prisma's query
 * compiler each read, too rare for its code to stay optimized, took 3–4 ms of the event loop.
 */
export async function readPausedTools(db: Pick<Database, "query">): Promise<ToolPause[]> {
  const rows = await db.query(PAUSED_TOOLS, [], { prepare: "idemgate_paused_tools" });
  return rows.map((r) => ({ tool: String(r.tool), reason: String(r.reason), actor: String(r.actor), pausedAtMs: Number(r.paused_at_ms), source: "operator" as const }));
}

export async function readPausedTool(db: Db, tool: string): Promise<ToolPause | null> {
  const r = await db.pausedTool.findUnique({ where: { tool } });
  return r ? { tool: r.tool, reason: r.reason, actor: r.actor, pausedAtMs: r.pausedAt.getTime(), source: "operator" } : null;
}
