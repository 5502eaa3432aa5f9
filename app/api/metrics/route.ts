import { withPrincipal } from "@/lib/auth/guard";
import { metrics } from "@/lib/server/metrics";

export const dynamic = "force-dynamic";

// GET /api/metrics – this process's Prometheus metrics (calls per tool and result, store and audit
// latency); a signed-in operator or an API token (the series carry tool names, no scopes or keys)
export const GET = withPrincipal("read", async () => {
  const { registry } = metrics();
  return new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType, "Cache-Control": "no-store" } });
});
