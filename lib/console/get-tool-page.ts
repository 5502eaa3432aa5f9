import { staleFlagsFor, type StaleFlag } from "@/lib/anomalies/stale-flags";
import { DEFAULT_WINDOW, getToolStats, isStatsWindow, STATS_WINDOWS, type StatsWindow, type ToolStats } from "@/lib/audit/tool-stats";
import type { Role } from "@/lib/auth/roles";
import { mcpToolOrigin, recentPassThroughCalls, type McpToolOrigin, type PassThroughCall } from "@/lib/mcp/upstream/console-view";
import type { Runtime } from "@/lib/server/runtime";
import type { ToolDescription } from "@/lib/tools";
import { effectiveDeclaration, type EffectiveDeclaration } from "@/lib/tools/declaration";

/** Everything a tool's console page shows; each of its panels takes what it needs from here. */
export interface ToolPage {
  tool: ToolDescription;
  /** null unless the tool is served from another MCP server */
  mcpOrigin: McpToolOrigin | null;
  declaration: EffectiveDeclaration;
  /** the window the page's figures cover */
  window: StatsWindow;
  /** the window's calls (write tools only: read tools leave no executions or suppressions) */
  stats: ToolStats | null;
  /** the suppression log's rows the reconciler flagged as stale, each with its anomaly */
  staleFlags: Record<string, StaleFlag>;
  /** a pass-through tool's recent calls (idempotent by its own word: not gated, but audited); null for others */
  passThrough: PassThroughCall[] | null;
  /** the operator looking at the page */
  role: Role;
  /** the page's own path, for links that change only its query */
  basePath: string;
}

/** The tool page of `name` (null: no such tool), its figures over `window` (the default when it is not one). */
export async function getToolPage(runtime: Runtime, name: string, window: unknown, role: Role): Promise<ToolPage | null> {
  if (!runtime.registry.has(name)) return null;
  const definition = runtime.registry.get(name);
  const tool = runtime.registry.describe(definition);
  const mcpOrigin = mcpToolOrigin(definition);
  const statsWindow = isStatsWindow(window) ? window : DEFAULT_WINDOW;
  const stats = tool.kind === "write" ? await getToolStats(runtime.db.prisma, { tool: name, windowMs: STATS_WINDOWS[statsWindow] }) : null;
  const staleFlags = stats ? await staleFlagsFor(runtime.db.prisma, stats.suppressionLog.map((s) => s.id)) : new Map<string, StaleFlag>();
  const passThrough = tool.kind !== "write" && definition.audited ? await recentPassThroughCalls(runtime.db.prisma, name) : null;
  return {
    tool,
    mcpOrigin,
    declaration: effectiveDeclaration(definition, tool, mcpOrigin?.server ?? null),
    window: statsWindow,
    stats,
    staleFlags: Object.fromEntries(staleFlags),
    passThrough,
    role,
    basePath: `/tools/${encodeURIComponent(name)}`,
  };
}
