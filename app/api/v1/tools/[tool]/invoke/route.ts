import { invokeTool } from "@/lib/gateway/invoke-tool";
import { withApiToken } from "@/lib/http/guard";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/invoke – run a tool exactly once per Idempotency-Key
export const POST = withApiToken<{ tool: string }>((request, { params, principal, runtime }) =>
  invokeTool(request, decodeURIComponent(params.tool), principal, runtime),
);
