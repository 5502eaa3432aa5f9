import { withMetricsReader } from "@/lib/auth/guard";
import { cachedDeploymentFigures } from "@/lib/process/deployment-figures";
import { metrics, setDeploymentFigures } from "@/lib/server/metrics";

export const dynamic = "force-dynamic";

// GET /api/metrics – this process's Prometheus metrics (calls per tool and result, store and audit
// latency) and the deployment's figures (keys by state, open anomalies, stores up; read at most
// every 5 s per process). They span every tenant, so: the deployment's metrics token
// (IDEMGATE_METRICS_TOKEN, for Prometheus) or a signed-in operator; a tenant's API token gets 403.
export const GET = withMetricsReader(async (_request, { runtime }) => {
  setDeploymentFigures(await cachedDeploymentFigures(runtime));
  const { registry } = metrics();
  return new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType, "Cache-Control": "no-store" } });
});
