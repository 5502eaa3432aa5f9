import Link from "next/link";
import clsx from "clsx";
import { formatDuration, formatTimestamp } from "@/lib/console/format";
import type { RunCall } from "@/lib/console/get-run";

const HAPPENED: Record<RunCall["happened"], { label: string; tone: string }> = {
  ran: { label: "ran", tone: "bg-ok-soft text-ok" },
  not_run: { label: "not run (tool said so)", tone: "bg-surface-2 text-muted" },
  running: { label: "running", tone: "bg-accent-soft text-accent" },
  held_stuck: { label: "held: stuck", tone: "bg-warn-soft text-warn" },
  held_unknown: { label: "held: outcome unknown", tone: "bg-unknown-soft text-unknown" },
  decided: { label: "decided by an operator", tone: "bg-surface-2 text-fg" },
  resent: { label: "sent again (service deduplicates)", tone: "bg-surface-2 text-fg" },
  replayed: { label: "replayed", tone: "bg-surface-2 text-muted" },
  refused_duplicate: { label: "refused: duplicate in progress", tone: "bg-warn-soft text-warn" },
  refused_held: { label: "refused: key held", tone: "bg-warn-soft text-warn" },
  refused_mismatch: { label: "refused: other arguments", tone: "bg-bad-soft text-bad" },
};

/** A run's calls in time order: each execution and duplicate, what happened, and links to its key and anomaly. */
export function RunCalls({ calls }: { calls: RunCall[] }) {
  return (
    <ol className="divide-y divide-line" data-testid="run-calls">
      {calls.map((c, i) => {
        const h = HAPPENED[c.happened];
        return (
          <li key={c.id} data-testid="run-call" data-happened={c.happened} className="grid gap-x-4 gap-y-1 px-5 py-2.5 text-[13px] sm:grid-cols-[2.5rem_11rem_minmax(0,1fr)_auto]">
            <span className="text-faint tabular-nums">{i + 1}</span>
            <span className="font-mono text-[12px] text-muted">{formatTimestamp(c.at)}</span>
            <span className="min-w-0 break-words">
              <Link href={`/tools/${encodeURIComponent(c.tool)}`} className="font-mono hover:underline">
                {c.tool}
              </Link>{" "}
              <span className="text-faint">key</span>{" "}
              <Link href={c.keyPath} className="font-mono text-accent hover:underline" data-testid="run-call-key">
                {c.key}
              </Link>
              {c.note && <span className="block text-xs text-muted">{c.note}</span>}
              {c.anomaly && (
                <Link href={c.anomaly.path} className="block text-xs text-bad hover:underline" data-testid="run-call-anomaly">
                  flagged as a stale suppression ({c.anomaly.status})
                </Link>
              )}
            </span>
            <span className="flex flex-wrap items-center gap-2 sm:justify-end">
              <span className={clsx("rounded-full px-2 py-0.5 text-xs font-medium whitespace-nowrap", h.tone)}>{h.label}</span>
              {c.resultStatus !== null && <span className="font-mono text-xs text-muted">{c.resultStatus}</span>}
              {c.durationMs !== null && <span className="text-xs text-muted tabular-nums">{formatDuration(c.durationMs)}</span>}
            </span>
          </li>
        );
      })}
    </ol>
  );
}
