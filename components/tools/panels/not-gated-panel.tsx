import type { ToolPage } from "@/lib/console/get-tool-page";
import { Card } from "./card";

/** Why a read or pass-through tool has no figures: its calls take no key. */
export function NotGatedPanel({ page }: { page: ToolPage }) {
  const { tool, mcpOrigin } = page;
  if (page.stats) return null;
  return (
    <Card title="Not gated">
      <p className="px-5 py-4 text-[13px] text-muted">
        {mcpOrigin?.gate === "idempotent"
          ? `${tool.name} is marked idempotent by its MCP server (idempotentHint): repeating it changes nothing more, so calls are passed through without a key and are never deduplicated; each call is recorded in the audit log (below).`
          : `${tool.name} is a read tool: it has no side effect to protect, so calls never take a key, are never deduplicated and leave no executions or suppressions in the audit log.`}{" "}
        The form below runs it through the gateway like any caller.
      </p>
    </Card>
  );
}
