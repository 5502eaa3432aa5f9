import { PassThroughCalls } from "@/components/tools/pass-through-calls";
import { SuppressionLog } from "@/components/tools/suppression-log";
import { formatCount } from "@/lib/console/format";
import type { ToolPage } from "@/lib/console/get-tool-page";
import { Card } from "./card";

/** A pass-through tool's latest calls: not gated, but each one is in the audit log. */
export function PassThroughPanel({ page }: { page: ToolPage }) {
  const calls = page.passThrough;
  if (!calls) return null;
  return (
    <Card title="Recent calls" aside={calls.length === 0 ? undefined : `latest ${calls.length} · over MCP or HTTP`} testId="pass-through-card">
      <PassThroughCalls calls={calls} />
    </Card>
  );
}

/** A write tool's latest duplicates answered without running it, stale ones flagged. */
export function SuppressionLogPanel({ page }: { page: ToolPage }) {
  const { stats, window } = page;
  if (!stats) return null;
  return (
    <Card
      title="Suppression log"
      aside={stats.suppressionLog.length === 0 ? undefined : `latest ${stats.suppressionLog.length} of ${formatCount(stats.totals.suppressions)} in the last ${window}`}
    >
      <SuppressionLog entries={stats.suppressionLog} staleFlags={page.staleFlags} />
    </Card>
  );
}
