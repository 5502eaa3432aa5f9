import { recentActivity, type ToolActivity } from "@/lib/audit/recent-activity";
import { checkHealth, type Health } from "@/lib/process/health";
import type { StateCounts } from "@/lib/idempotency/key-store";
import type { Runtime } from "@/lib/server/runtime";

export const ACTIVITY_WINDOW_MS = 60 * 60 * 1000;

/** A tool's row on the overview: the last hour's calls, and its keys held now. */
export interface ToolOverview extends ToolActivity {
  /** keys of this tool stuck or unknown now, whenever their calls ran; null when the key store did not answer */
  held: { stuck: number; unknown: number } | null;
}

/** at most this many tools are counted for held keys (one count per tool) */
export const OVERVIEW_TOOLS = 50;

export interface Overview {
  /** null when the key store did not answer; `health` says why */
  counts: StateCounts | null;
  /** tools with calls in the last hour or keys held now, busiest first */
  activity: ToolOverview[];
  openAnomalies: number | null;
  health: Health;
  at: Date;
}

/** Everything the console's front page shows, read concurrently; one failing source does not hide the others. */
export async function getOverview(runtime: Runtime): Promise<Overview> {
  const nowMs = Date.now();
  const [counts, activity, openAnomalies, health] = await Promise.all([
    runtime.store.counts(nowMs).catch(() => null),
    recentActivity(runtime.db.prisma, nowMs - ACTIVITY_WINDOW_MS).catch(() => []),
    runtime.db.prisma.anomaly.count({ where: { status: "open" } }).catch(() => null),
    checkHealth(runtime),
  ]);
  // a tool with keys held now is listed even without calls in the last hour: someone must decide
  const writeTools = runtime.registry.list().filter((t) => t.kind === "write").map((t) => t.name);
  const names = [...new Set([...activity.map((a) => a.tool), ...writeTools])].slice(0, OVERVIEW_TOOLS);
  const held = await Promise.all(
    names.map((tool) =>
      runtime.store
        .counts(nowMs, { tool })
        .then((c) => ({ stuck: c.stuck, unknown: c.unknown }))
        .catch(() => null),
    ),
  );
  const byTool = new Map(activity.map((a) => [a.tool, a]));
  const rows: ToolOverview[] = names
    .map((tool, i) => ({ ...(byTool.get(tool) ?? idle(tool)), held: held[i] }))
    .filter((r) => byTool.has(r.tool) || (r.held !== null && r.held.stuck + r.held.unknown > 0));
  return { counts, activity: rows, openAnomalies, health, at: new Date(nowMs) };
}

function idle(tool: string): ToolActivity {
  return { tool, executions: 0, suppressions: { replay: 0, conflict: 0, stuck: 0, unknown: 0, mismatch: 0, fresh_key: 0 }, suppressionsTotal: 0 };
}
