import clsx from "clsx";
import { formatDuration, formatTimestamp } from "@/lib/console/format";
import type { PassThroughCall } from "@/lib/mcp/upstream/console-view";
import { TableHead } from "@/components/ui/table-head";

const OUTCOME_STYLE: Record<string, string> = {
  succeeded: "bg-ok-soft text-ok",
  final_error: "bg-warn-soft text-warn",
  failed: "bg-bad-soft text-bad",
  unknown: "bg-surface-2 text-muted",
};

const COLUMNS = [{ label: "Started" }, { label: "Via" }, { label: "Outcome" }, { label: "Took", align: "right" }, { label: "Session · token" }] as const;

/** The latest calls passed through to an idempotent tool: no key taken, each one recorded in the audit log. */
export function PassThroughCalls({ calls }: { calls: PassThroughCall[] }) {
  if (calls.length === 0) {
    return <p className="px-5 py-6 text-[13px] text-muted">No calls yet. Each call is recorded here, over MCP or HTTP, without taking a key.</p>;
  }
  return (
    <div className="overflow-x-auto">
      <table data-testid="pass-through-calls" className="w-full text-[13px]">
        <TableHead columns={COLUMNS} />
        <tbody className="divide-y divide-line">
          {calls.map((c) => (
            <tr key={c.id} data-testid="pass-through-call" data-transport={c.transport} data-outcome={c.outcome ?? "running"}>
              <td className="px-5 py-2 whitespace-nowrap text-muted tabular-nums">{formatTimestamp(c.startedAt)}</td>
              <td className="px-3 py-2">
                <span className="inline-flex rounded-full bg-surface-2 px-2 py-0.5 font-mono text-[11px] font-medium">{c.transport}</span>
              </td>
              <td className="px-3 py-2">
                <span className={clsx("inline-flex rounded-full px-2 py-0.5 text-[11px] font-medium", OUTCOME_STYLE[c.outcome ?? "unknown"] ?? OUTCOME_STYLE.unknown)}>
                  {c.outcome === null ? "running" : c.outcome.replace("_", " ")}
                  {c.resultStatus !== null && c.resultStatus !== 200 ? ` · ${c.resultStatus}` : ""}
                </span>
                {c.error && <span className="mt-0.5 block max-w-md truncate text-xs text-muted" title={c.error}>{c.error}</span>}
              </td>
              <td className="px-3 py-2 text-right whitespace-nowrap text-muted tabular-nums">{c.durationMs === null ? "—" : formatDuration(c.durationMs)}</td>
              <td className="px-5 py-2 font-mono text-xs text-muted">
                {c.session ?? "—"} · {c.caller ? `token ${c.caller.slice(0, 8)}` : "—"}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
