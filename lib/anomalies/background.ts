import { recordOperatorAction } from "@/lib/audit/operator-actions";
import type { Runtime } from "@/lib/runtime";
import { listDemoEffects } from "@/lib/tools";
import { reconcile, type ReconcileReport } from "./reconcile";

/** One reconciler pass over the runtime's audit log and key store. */
export function reconcileRuntime(runtime: Runtime, options: { nowMs?: number } = {}): Promise<ReconcileReport> {
  return reconcile({ prisma: runtime.db.prisma, store: runtime.store, listEffects: listDemoEffects }, options);
}

/** An operator asked for a pass from the console: run it and record who did. */
export async function reconcileOnDemand(runtime: Runtime, actor: string): Promise<ReconcileReport> {
  await runtime.audit.flush();
  const report = await reconcileRuntime(runtime);
  await recordOperatorAction(runtime.db.prisma, {
    actor,
    action: "reconcile",
    reason: "reconciler pass requested from the console",
    after: { flagged: report.flagged.length, created: report.created, backfilled: report.backfilled },
  });
  return report;
}

/**
 * Inside the server: a reconciler pass and a purge of expired records every interval. Passes never
 * overlap; a failing pass is logged and the next one runs on time.
 */
export function startBackgroundJobs(runtime: Runtime): () => void {
  const interval = runtime.config.reconcileIntervalMs;
  if (interval <= 0) return () => {};
  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await runtime.audit.flush();
      await reconcileRuntime(runtime);
      await runtime.store.purge(Date.now() - runtime.config.retentionMs, 1_000);
    } catch (err) {
      console.error("background reconcile/purge failed; will try again", err);
    } finally {
      running = false;
    }
  }, interval);
  timer.unref();
  return () => clearInterval(timer);
}
