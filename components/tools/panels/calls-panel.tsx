import { ActivityChart } from "@/components/tools/activity-chart";
import { formatDuration } from "@/lib/console/format";
import type { ToolPage } from "@/lib/console/get-tool-page";
import { Card } from "./card";

/** A write tool's executions and suppressions over the window, bucket by bucket. */
export function CallsPanel({ page }: { page: ToolPage }) {
  const { stats, tool, window } = page;
  if (!stats) return null;
  return (
    <Card title="Calls over time" aside={`${formatDuration(stats.bucketMs)} buckets · UTC`}>
      <div className="px-5 pt-3 pb-4">
        {stats.totals.executions + stats.totals.suppressions === 0 ? (
          <p className="py-10 text-center text-[13px] text-muted">No calls to {tool.name} in the last {window}.</p>
        ) : (
          <ActivityChart buckets={stats.buckets} bucketMs={stats.bucketMs} />
        )}
      </div>
    </Card>
  );
}
