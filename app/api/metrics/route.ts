import { withPrincipal } from "@/lib/auth/guard";
import { readDeploymentFigures } from "@/lib/process/deployment-figures";
import { metrics, setDeploymentFigures } from "@/lib/server/metrics";

export const dynamic = "force-dynamic";

// GET /api/metrics – this process's Prometheus metrics (calls per tool and result, store and audit
// latency) and the deployment's figures read now (keys by state, open anomalies, stores up); a
// signed-in operator or an API token (the series carry tool names, no scopes or keys)
export const GET = withPrincipal("read", async (_request, { runtime }) => {
  setDeploymentFigures(await readDeploymentFigures(runtime));
  const { registry } = metrics();
  return new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType, "Cache-Control": "no-store" } });
});
