import { appRoute } from "@/lib/gateway/app-route";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/invoke – run a tool exactly once per Idempotency-Key (lib/gateway/routes.ts)
export const POST = appRoute("invoke");
