import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// GET /api/v1/tools/{tool}/held – the token's scope's held calls of a client-run tool, for its probe (lib/gateway/routes.ts)
export const GET = appRoute("held");
