import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/executions/{executionId}/probe/answer – the probe of a held client-run call (lib/gateway/routes.ts)
export const POST = appRoute("probeAnswer");
