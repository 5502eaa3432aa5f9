import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/executions/{executionId}/heartbeat – settle a reservation (lib/gateway/routes.ts)
export const POST = appRoute("heartbeat");
