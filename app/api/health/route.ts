import { checkHealth } from "@/lib/health";
import { getRuntime } from "@/lib/runtime";

export const dynamic = "force-dynamic";

// GET /api/health – key store and audit database reachability; 200 when both answer, else 503
export async function GET() {
  const health = await checkHealth(await getRuntime());
  return Response.json(health, {
    status: health.status === "ok" ? 200 : 503,
    headers: { "Cache-Control": "no-store" },
  });
}
