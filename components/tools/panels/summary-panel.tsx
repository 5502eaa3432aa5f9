import clsx from "clsx";
import { FreshKeyFigure } from "@/components/tools/fresh-key-figure";
import { OUTCOMES, type ToolStats } from "@/lib/audit/tool-stats";
import { executionsNote, formatCount, formatDuration } from "@/lib/console/format";
import type { ToolPage } from "@/lib/console/get-tool-page";

/** A write tool's figures over the window: executions, suppressions, outcomes, durations; and the duplicates under fresh keys. */
export function SummaryPanel({ page }: { page: ToolPage }) {
  if (!page.stats) return null;
  return (
    <>
      <Summary stats={page.stats} window={page.window} />
      <FreshKeyFigure counts={page.stats.freshKeyDuplicates} window={page.window} />
    </>
  );
}

function Stat({ label, value, sub, testId }: { label: string; value: React.ReactNode; sub?: React.ReactNode; testId?: string }) {
  return (
    <div data-testid={testId} className="rounded-xl border border-line bg-surface px-4 py-3.5 shadow-xs">
      <p className="text-xs text-muted">{label}</p>
      <p className="mt-1 text-2xl font-semibold tracking-tight tabular-nums">{value}</p>
      {sub && <div className="mt-0.5 text-xs text-muted">{sub}</div>}
    </div>
  );
}

const OUTCOME_TONE: Record<string, string> = {
  succeeded: "text-ok",
  failed: "text-bad",
  final_error: "text-warn",
  late_completion: "text-warn",
  released: "text-muted",
  unknown: "text-muted",
};

function Summary({ stats, window }: { stats: ToolStats; window: string }) {
  const { totals } = stats;
  const calls = totals.executions + totals.suppressions;
  const rate = calls === 0 ? null : totals.suppressions / calls;
  return (
    <div className="grid grid-cols-2 gap-3 lg:grid-cols-4">
      <Stat label={`Executions · ${window}`} value={formatCount(totals.executions)} sub={executionsNote(totals.executions, stats.outcomes)} testId="stat-executions" />
      <Stat
        label={`Suppressed · ${window}`}
        value={formatCount(totals.suppressions)}
        sub={rate === null ? "no calls" : `${(Math.round(rate * 1000) / 10).toString()}% of calls · ${formatCount(totals.replay)} ${totals.replay === 1 ? "replay" : "replays"}`}
        testId="stat-suppressions"
      />
      {/* two columns of outcomes need the full width of a phone */}
      <div data-testid="stat-outcomes" className="col-span-2 rounded-xl border border-line bg-surface px-4 py-3.5 shadow-xs lg:col-span-1">
        <p className="text-xs text-muted">Outcomes</p>
        <dl className="mt-1.5 grid grid-cols-2 gap-x-3 gap-y-0.5 text-xs">
          {OUTCOMES.filter((o) => o !== "released" || stats.outcomes.released > 0).map((o) => (
            <div key={o} className="flex justify-between gap-2">
              <dt className="min-w-0 text-muted">{o.replace("_", " ")}</dt>
              <dd className={clsx("tabular-nums", stats.outcomes[o] > 0 ? OUTCOME_TONE[o] : "text-faint")}>{formatCount(stats.outcomes[o])}</dd>
            </div>
          ))}
        </dl>
      </div>
      <Stat
        label="Duration p50 / p95"
        value={stats.durationMs.p50 === null ? "—" : formatDuration(stats.durationMs.p50)}
        sub={stats.durationMs.p95 === null ? "no finished executions" : `p95 ${formatDuration(stats.durationMs.p95)}`}
        testId="stat-duration"
      />
    </div>
  );
}
