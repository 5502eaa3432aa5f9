import { gatewayRequest, invokeTool } from "@/lib/gateway/invoke-tool";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/invoke – run a tool exactly once per Idempotency-Key
export const POST = withApiToken<{ tool: string }>(async (request, { params, principal, runtime }) =>
  toResponse(await invokeTool(gatewayRequest(request), params.tool, principal, runtime)),
);
