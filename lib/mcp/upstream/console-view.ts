import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import type { Transport } from "@/lib/idempotency/audit-port";
import type { ToolDefinition } from "@/lib/tools/define-tool";
import { mcpOriginOf, type McpGate } from "./proxied-tool";
import { mcpUpstreamStatuses } from "./serve-upstreams";
import type { UpstreamStatus } from "./upstreams";

export type { McpGate };

/** How a tool of another MCP server is gated, from its annotations (DESIGN.md § MCP). */
export const MCP_GATE_LABELS: Record<McpGate, string> = {
  read: "read (readOnlyHint): never gated",
  idempotent: "passed through (idempotentHint): no key needed",
  write: "gated write: deduplicated by key",
};

/** The same, when the server's or the tool's `gate` setting decided it rather than the annotations. */
const SETTING_LABELS: Record<"always" | "never", Partial<Record<McpGate, string>>> = {
  always: { write: "gated write (gate: always): deduplicated by key" },
  never: { idempotent: "passed through (gate: never): no key needed, recorded" },
};

/** Where a tool served by Idemgate comes from, for the console's Tools pages. */
export interface McpToolOrigin {
  server: string;
  /** the tool's own name at its server */
  tool: string;
  gate: McpGate;
  gateLabel: string;
}

/** The MCP server a tool is proxied from and how it is gated; null for a configured tool. */
export function mcpToolOrigin(tool: ToolDefinition): McpToolOrigin | null {
  const origin = mcpOriginOf(tool);
  if (!origin) return null;
  const { gate, gateSetting } = origin;
  const label = gateSetting === "by-annotations" ? undefined : SETTING_LABELS[gateSetting][gate];
  return { server: origin.server, tool: origin.tool, gate, gateLabel: label ?? MCP_GATE_LABELS[gate] };
}

/** One guarded MCP server on the status page. */
export interface McpServerRow extends UpstreamStatus {
  /**
   * The server is down or still connecting. Shown as a warning: its tools' calls are "not run"
   * (nothing is sent) until it is back, but Idemgate itself, and its other tools, keep working, so
   * the overall health status (and `GET /api/health`'s 200/503) does not change.
   */
  warning: boolean;
}

/** Every guarded MCP server of IDEMGATE_MCP_SERVERS, in configured order (empty when none is configured). */
export function mcpServerRows(statuses: UpstreamStatus[] = mcpUpstreamStatuses()): McpServerRow[] {
  return statuses.map((status) => ({ ...status, warning: status.state !== "up" }));
}

/** One call passed through to an idempotent tool (recorded in the audit log, no key taken). */
export interface PassThroughCall {
  id: string;
  startedAt: Date;
  transport: Transport;
  /** the API token's id */
  caller: string | null;
  session: string | null;
  /** null while it runs */
  outcome: string | null;
  durationMs: number | null;
  resultStatus: number | null;
  /** for operators: why it failed or its outcome is unknown (a server's error text included) */
  error: string | null;
}

export const PASS_THROUGH_CALLS_LIMIT = 20;

/** The latest calls of an audited pass-through tool, newest first, for its console page: a backward scan of the (tool, started_at) index. */
export async function recentPassThroughCalls(prisma: PrismaClient, tool: string, limit = PASS_THROUGH_CALLS_LIMIT): Promise<PassThroughCall[]> {
  return prisma.$queryRaw<PassThroughCall[]>(Prisma.sql`
    SELECT id, started_at AS "startedAt", transport, caller, session, outcome, duration_ms AS "durationMs", result_status AS "resultStatus", error
    FROM executions WHERE tool = ${tool} ORDER BY started_at DESC LIMIT ${limit}::int`);
}
