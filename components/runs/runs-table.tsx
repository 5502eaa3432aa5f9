import Link from "next/link";
import { formatCount, formatTimestamp } from "@/lib/console/format";
import type { RunSummary } from "@/lib/console/get-run";

/** Recent runs with their counts, newest activity first; a run with held calls says so. */
export function RunsTable({ runs }: { runs: RunSummary[] }) {
  return (
    <ul className="divide-y divide-line" data-testid="runs-list">
      {runs.map((r) => (
        <li key={`${r.scope}\n${r.session}`} data-testid="run-row" className="flex flex-wrap items-baseline justify-between gap-x-4 gap-y-1 px-5 py-2.5 text-[13px]">
          <span className="min-w-0 break-all">
            <Link href={r.path} className="font-mono font-medium text-accent hover:underline">
              {r.session}
            </Link>{" "}
            <span className="text-faint">in</span> <span className="font-mono text-[12.5px] text-muted">{r.scope}</span>
          </span>
          <span className="flex flex-wrap gap-x-3 text-xs text-muted">
            <span>{formatCount(r.executions)} run</span>
            <span>{formatCount(r.suppressions)} suppressed</span>
            {r.held > 0 && <span className="font-medium text-warn" data-testid="run-held">{formatCount(r.held)} held</span>}
            <span>last {formatTimestamp(r.lastAt)}</span>
          </span>
        </li>
      ))}
    </ul>
  );
}
