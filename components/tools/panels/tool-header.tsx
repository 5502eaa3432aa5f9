import Link from "next/link";
import { KeyBadge, KindBadge } from "@/components/tools/kind-badge";
import { McpOriginBadge } from "@/components/tools/mcp-origin-badge";
import { WindowPicker } from "@/components/tools/window-picker";
import type { ToolPage } from "@/lib/console/get-tool-page";

/** The breadcrumb, the tool's name and badges, its description, where an MCP tool comes from, and the window picker. */
export function ToolHeader({ page }: { page: ToolPage }) {
  const { tool, mcpOrigin } = page;
  const write = tool.kind === "write";
  return (
    <div>
      <nav aria-label="Breadcrumb" className="text-xs text-muted">
        <Link href="/tools" className="hover:text-fg">
          Tools
        </Link>
        <span className="px-1.5 text-faint">/</span>
      </nav>
      <div className="mt-1 flex flex-wrap items-end justify-between gap-4">
        <div className="min-w-0">
          <div className="flex flex-wrap items-center gap-2">
            <h1 className="font-mono text-xl font-semibold tracking-tight">{tool.name}</h1>
            <KindBadge kind={tool.kind} />
            {write && <KeyBadge mode={tool.idempotencyKey} />}
            {mcpOrigin && <McpOriginBadge origin={mcpOrigin} />}
          </div>
          <p className="mt-1 max-w-3xl text-muted">{tool.description}</p>
          {mcpOrigin && (
            <p data-testid="mcp-origin-detail" className="mt-1 max-w-3xl text-xs text-muted">
              Proxied from <span className="font-mono">{mcpOrigin.tool}</span> at the MCP server{" "}
              <span className="font-mono">{mcpOrigin.server}</span> (IDEMGATE_MCP_SERVERS): {mcpOrigin.gateLabel}.{" "}
              <Link href="/status#mcp-servers" className="text-accent hover:underline">
                Server status
              </Link>
            </p>
          )}
        </div>
        {write && <WindowPicker basePath={page.basePath} current={page.window} />}
      </div>
    </div>
  );
}
