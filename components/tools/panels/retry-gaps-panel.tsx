import { GapHistogram } from "@/components/tools/gap-histogram";
import { fmt } from "@/lib/audit/retry-gaps";
import { formatCount } from "@/lib/console/format";
import type { ToolPage } from "@/lib/console/get-tool-page";
import { Card } from "./card";

/** How long after the first call its replays came: the suggested fallback TTL and the evidence for it (write tools). */
export function RetryGapsPanel({ page }: { page: ToolPage }) {
  const { stats, tool, window } = page;
  if (!stats) return null;
  const g = stats.gaps;
  const ttl = g.suggestedTtlMs;
  const rows: [string, string][] = [
    ["replays", formatCount(g.samples)],
    ["p50", g.p50Ms === null ? "—" : fmt(g.p50Ms)],
    ["p99", g.p99Ms === null ? "—" : fmt(g.p99Ms)],
    ["p99.9", g.p999Ms === null ? "—" : fmt(g.p999Ms)],
    ["retry cluster up to", g.retryClusterMaxMs === null ? "—" : fmt(g.retryClusterMaxMs)],
    ["first genuine repeat", g.firstRepeatGapMs === null ? "none seen" : fmt(g.firstRepeatGapMs)],
    ["stale threshold", fmt(g.staleThresholdMs)],
  ];
  return (
    <Card title="Retry gaps" aside={`replays, last ${window}`} testId="retry-gaps">
      <div className="space-y-4 px-5 pt-4 pb-5">
        <div>
          <p data-testid="suggested-ttl" className="text-[15px] font-semibold tracking-tight">
            {ttl === null ? "No fallback TTL suggested yet" : `Suggested fallback TTL: ${fmt(ttl)}`}
            {ttl !== null && tool.fallbackTtlMs !== null && (
              <span className="ml-2 text-xs font-normal text-muted">configured: {fmt(tool.fallbackTtlMs)}</span>
            )}
          </p>
          <p data-testid="gap-reasoning" className="mt-1 text-[13px] text-muted">
            {g.reasoning.charAt(0).toUpperCase() + g.reasoning.slice(1)}.
          </p>
        </div>
        {g.samples > 0 ? (
          <GapHistogram
            histogram={g.histogram}
            suggestedTtlMs={ttl}
            staleThresholdMs={g.staleThresholdMs}
            labels={{ ttl: ttl === null ? null : fmt(ttl), stale: fmt(g.staleThresholdMs) }}
          />
        ) : (
          <p className="rounded-lg border border-dashed border-line py-8 text-center text-[13px] text-muted">
            The histogram fills as duplicates arrive: each replay records how long after the original it came.
          </p>
        )}
        <dl data-testid="gap-evidence" className="grid grid-cols-2 gap-x-6 gap-y-1 text-[12.5px] sm:grid-cols-4">
          {rows.map(([label, value]) => (
            <div key={label} className="flex flex-col">
              <dt className="text-xs text-muted">{label}</dt>
              <dd className="font-medium tabular-nums">{value}</dd>
            </div>
          ))}
        </dl>
        <p className="text-xs text-faint">
          {tool.fallbackTtlMs === null
            ? "This tool takes explicit keys, so its TTL can safely be long. A replay far beyond the retry cluster usually means a caller reuses one key for several actions (per conversation instead of per action)."
            : "Keyless calls are deduplicated by their arguments for the fallback TTL: long enough to catch the retries, short enough not to swallow a genuine repeat of the same action."}
          {g.truncated && " Based on the newest 20,000 replays of the window."}
        </p>
      </div>
    </Card>
  );
}
