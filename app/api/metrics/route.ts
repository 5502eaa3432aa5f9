import { metricsBearerAllowed } from "@/lib/auth/metrics-access";
import { can } from "@/lib/auth/roles";
import { currentOperator } from "@/lib/auth/session";
import { errorResponse, forbidden, unauthorized } from "@/lib/http/problem";
import { cachedDeploymentFigures } from "@/lib/process/deployment-figures";
import { metrics, setDeploymentFigures } from "@/lib/server/metrics";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

// GET /api/metrics – this process's Prometheus metrics (calls per tool and result, store and audit
// latency) and the deployment's figures (keys by state, open anomalies, stores up; read at most
// every 5 s per process). They span every tenant, so: the deployment's metrics token
// (IDEMGATE_METRICS_TOKEN, for Prometheus) or a signed-in operator; a tenant's API token gets 403.
export async function GET(request: Request): Promise<Response> {
  try {
    const runtime = await getRuntime();
    if (!(await metricsBearerAllowed(request.headers, runtime))) {
      const operator = await currentOperator();
      if (!operator) throw unauthorized("sign in to the console, or send the metrics token (IDEMGATE_METRICS_TOKEN) as a bearer token");
      if (!can(operator.role, "read")) throw forbidden(`the ${operator.role} role may not read metrics`);
    }
    setDeploymentFigures(await cachedDeploymentFigures(runtime));
    const { registry } = metrics();
    return new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType, "Cache-Control": "no-store" } });
  } catch (err) {
    return errorResponse(err, new URL(request.url).pathname);
  }
}
