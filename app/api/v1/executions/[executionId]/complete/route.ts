import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/executions/{executionId}/complete – settle a reservation (lib/gateway/routes.ts)
export const POST = appRoute("complete");
