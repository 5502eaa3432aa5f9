import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/reservations – reserve a key for a tool that runs in its caller's process (lib/gateway/routes.ts)
export const POST = appRoute("reserve");
