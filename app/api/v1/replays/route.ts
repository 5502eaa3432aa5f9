import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/replays – record replays a client answered from its own cache (lib/gateway/routes.ts)
export const POST = appRoute("replays");
