import { reconcileOnDemand } from "@/lib/process/background";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";

export const dynamic = "force-dynamic";

// POST /api/v1/anomalies/reconcile – run one reconciler pass now
export const POST = withPrincipal("reconcile", async (_request, { principal, runtime }) => {
  const report = await reconcileOnDemand(runtime, actorOf(principal));
  return Response.json({ examined: report.examined, backfilled: report.backfilled, flagged: report.flagged.length, created: report.created });
});
