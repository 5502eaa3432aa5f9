import { formatDuration } from "@/lib/console/format";
import type { ToolPage } from "@/lib/console/get-tool-page";
import { Card } from "./card";
import { RUNS_LABELS } from "./declaration-panel";

/** The tool's idempotency policy in an operator's words: TTL, lease, when stuck, fallback dedupe. */
export function PolicyPanel({ page }: { page: ToolPage }) {
  const { tool, mcpOrigin } = page;
  const declaredIn = page.declaration.declaredIn;
  const write = tool.kind === "write";
  // the same words as the declaration's "Runs"
  const runs = mcpOrigin ? `at the MCP server ${mcpOrigin.server}` : RUNS_LABELS[tool.source];
  const rows: [string, React.ReactNode, string][] = write
    ? [
        ["Result TTL", formatDuration(tool.ttlMs), "how long a stored result is replayed"],
        ["Lease", formatDuration(tool.leaseMs), "how long a running call is trusted before it counts as stuck"],
        ["When stuck", <span key="s" className="font-mono text-[12.5px]">{tool.stuckPolicy}</span>, tool.stuckPolicy === "block" ? "an operator decides: release or resolve" : "the next call runs the side effect again"],
        [
          "Fallback dedupe",
          tool.fallbackTtlMs === null ? "off" : formatDuration(tool.fallbackTtlMs),
          tool.fallbackTtlMs === null ? "a write without a key is refused (400)" : "keyless calls are deduplicated by their arguments",
        ],
        ["Idempotency-Key", tool.idempotencyKey, ""],
        ["Runs", runs, ""],
      ]
    : [
        ["Idempotency-Key", "unused", mcpOrigin?.gate === "idempotent" ? "passed through: idempotent by its server's word" : "read tools are never gated"],
        ["Runs", runs, ""],
      ];
  return (
    <Card title="Policy" testId="tool-policy">
      <dl className="divide-y divide-line">
        {rows.map(([label, value, hint]) => (
          <div key={label} className="grid grid-cols-[8.5rem_1fr] gap-3 px-5 py-2.5">
            <dt className="text-muted">{label}</dt>
            <dd className="min-w-0">
              <span className="font-medium">{value}</span>
              {hint && <p className="text-xs text-muted">{hint}</p>}
            </dd>
          </div>
        ))}
      </dl>
      <p className="border-t border-line px-5 py-2.5 text-xs text-faint">
        {mcpOrigin ? (
          <>
            From its server&apos;s annotations (<code className="font-mono">IDEMGATE_MCP_SERVERS</code>).
          </>
        ) : (
          <>
            Declared in <code className="font-mono">{declaredIn}</code>.
          </>
        )}
      </p>
    </Card>
  );
}
