import clsx from "clsx";
import type { McpToolOrigin } from "@/lib/mcp/upstream/console-view";

const GATE_SHORT = { read: "read", idempotent: "passed through", write: "gated write" } as const;

/** A tool proxied from another MCP server (IDEMGATE_MCP_SERVERS): which one, and how Idemgate gates it. */
export function McpOriginBadge({ origin }: { origin: McpToolOrigin }) {
  return (
    <span
      data-testid="mcp-origin"
      data-mcp-server={origin.server}
      data-mcp-gate={origin.gate}
      title={`${origin.tool} at the MCP server ${origin.server} · ${origin.gateLabel}`}
      className="inline-flex items-center gap-1 rounded-full bg-surface-2 px-2 py-0.5 text-[11px] font-medium text-muted"
    >
      via MCP server <span className="font-mono text-fg">{origin.server}</span>
      <span aria-hidden="true" className="text-faint">·</span>
      <span className={clsx(origin.gate === "write" ? "text-accent" : origin.gate === "idempotent" && "text-warn")}>{GATE_SHORT[origin.gate]}</span>
    </span>
  );
}
