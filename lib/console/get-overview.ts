import { recentActivity, type ToolActivity } from "@/lib/audit/recent-activity";
import { checkHealth, type Health } from "@/lib/process/health";
import type { StateCounts } from "@/lib/idempotency/key-store";
import type { Runtime } from "@/lib/server/runtime";

export const ACTIVITY_WINDOW_MS = 60 * 60 * 1000;

export interface Overview {
  /** null when the key store did not answer; `health` says why */
  counts: StateCounts | null;
  activity: ToolActivity[];
  openAnomalies: number | null;
  health: Health;
  at: Date;
}

/** Everything the console's front page shows, read concurrently; one failing source does not hide the others. */
export async function getOverview(runtime: Runtime): Promise<Overview> {
  const nowMs = Date.now();
  const [counts, activity, openAnomalies, health] = await Promise.all([
    runtime.store.counts(nowMs).catch(() => null),
    recentActivity(runtime.db.prisma, nowMs - ACTIVITY_WINDOW_MS).catch(() => []),
    runtime.db.prisma.anomaly.count({ where: { status: "open" } }).catch(() => null),
    checkHealth(runtime),
  ]);
  return { counts, activity, openAnomalies, health, at: new Date(nowMs) };
}
