import type { Metadata } from "next";
import Link from "next/link";
import clsx from "clsx";
import { KeyBadge, KindBadge } from "@/components/tools/kind-badge";
import { McpOriginBadge } from "@/components/tools/mcp-origin-badge";
import { getToolTotals } from "@/lib/audit/tool-stats";
import { requireOperator } from "@/lib/auth/require-operator";
import { formatCount, formatDuration } from "@/lib/console/format";
import { mcpToolOrigin } from "@/lib/mcp/upstream/console-view";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Tools" };

export default async function ToolsPage() {
  await requireOperator();
  const runtime = await getRuntime();
  const tools = runtime.registry.list().map((t) => ({ ...runtime.registry.describe(t), mcpOrigin: mcpToolOrigin(t) }));
  const totals = await getToolTotals(runtime.db.prisma);

  return (
    <div className="space-y-6">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Tools</h1>
        <p className="mt-1 max-w-3xl text-muted">
          Every configured tool with its idempotency policy and the last 24 hours of calls (in whole half hours, as on a tool&apos;s
          page): executions that ran the side effect, and duplicates suppressed from an existing record. Open a tool for its retry gaps, a suggested fallback TTL and an invoke form.
        </p>
      </div>

      <div className="overflow-x-auto rounded-xl border border-line bg-surface shadow-xs">
        <table data-testid="tools-table" className="w-full text-[13px]">
          <thead>
            <tr className="border-b border-line text-left text-xs whitespace-nowrap text-muted">
              <th scope="col" className="px-5 py-2.5 font-medium">Tool</th>
              <th scope="col" className="px-3 py-2.5 font-medium">TTL</th>
              <th scope="col" className="px-3 py-2.5 font-medium">Lease</th>
              <th scope="col" className="px-3 py-2.5 font-medium">When stuck</th>
              <th scope="col" className="px-3 py-2.5 font-medium">Fallback dedupe</th>
              <th scope="col" className="px-3 py-2.5 text-right font-medium">Executions 24 h</th>
              <th scope="col" className="px-3 py-2.5 text-right font-medium">Suppressed 24 h</th>
              <th scope="col" className="px-5 py-2.5 font-medium">Suppression rate</th>
            </tr>
          </thead>
          <tbody className="divide-y divide-line">
            {tools.map((tool) => {
              const t = totals.get(tool.name);
              const write = tool.kind === "write";
              return (
                <tr key={tool.name} data-testid={`tool-row-${tool.name}`} className="align-top hover:bg-surface-2/50">
                  <td className="px-5 py-3">
                    <div className="flex flex-wrap items-center gap-2">
                      <Link href={`/tools/${encodeURIComponent(tool.name)}`} className="font-mono text-[13px] font-medium text-accent hover:underline">
                        {tool.name}
                      </Link>
                      <KindBadge kind={tool.kind} />
                      {write && <KeyBadge mode={tool.idempotencyKey} />}
                      {tool.source === "upstream" && <span className="text-[11px] text-faint">upstream</span>}
                      {tool.mcpOrigin && <McpOriginBadge origin={tool.mcpOrigin} />}
                    </div>
                    <p className="mt-1 max-w-md text-xs text-muted">{tool.description}</p>
                  </td>
                  {write ? (
                    <>
                      <td className="px-3 py-3 whitespace-nowrap tabular-nums">{formatDuration(tool.ttlMs)}</td>
                      <td className="px-3 py-3 whitespace-nowrap tabular-nums">{formatDuration(tool.leaseMs)}</td>
                      <td className="px-3 py-3">
                        <span className={clsx("font-mono text-[12px]", tool.stuckPolicy === "takeover" && "text-warn")}>{tool.stuckPolicy}</span>
                      </td>
                      <td className="px-3 py-3 whitespace-nowrap">
                        {tool.fallbackTtlMs === null ? <span className="text-faint">off</span> : <span className="text-warn">{formatDuration(tool.fallbackTtlMs)}</span>}
                      </td>
                      <td className="px-3 py-3 text-right tabular-nums" data-testid="executions">
                        {formatCount(t?.executions ?? 0)}
                      </td>
                      <td className="px-3 py-3 text-right tabular-nums" data-testid="suppressions">
                        {formatCount(t?.suppressions ?? 0)}
                      </td>
                      <td className="px-5 py-3">
                        <Rate rate={t?.suppressionRate ?? null} />
                      </td>
                    </>
                  ) : (
                    <td colSpan={7} className="px-3 py-3 text-xs text-faint">
                      {tool.mcpOrigin?.gate === "idempotent"
                        ? "idempotent at its MCP server: passed through without a key, not deduplicated, each call audited"
                        : "read: never gated, not deduplicated, not audited"}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <p className="text-xs text-faint">
        Suppression rate: suppressed duplicates as a share of all calls that reached the engine (executions + suppressions).
      </p>
    </div>
  );
}

function Rate({ rate }: { rate: number | null }) {
  if (rate === null) return <span className="text-faint">no calls</span>;
  const pct = Math.round(rate * 1000) / 10;
  return (
    <div className="flex items-center gap-2" data-testid="suppression-rate" data-rate={rate}>
      <div className="h-1.5 w-20 overflow-hidden rounded-full bg-surface-2" aria-hidden="true">
        <div className="h-full rounded-full bg-ok" style={{ width: `${Math.max(2, rate * 100)}%` }} />
      </div>
      <span className="tabular-nums">{pct}%</span>
    </div>
  );
}
