import { gatewayRequest } from "@/lib/gateway/invoke-tool";
import { reserveTool } from "@/lib/gateway/reservations";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// POST /api/v1/tools/{tool}/reservations – reserve a key for a tool that runs in its caller's process
export const POST = withApiToken<{ tool: string }>(async (request, { params, principal, runtime }) =>
  toResponse(await reserveTool(gatewayRequest(request), decodeURIComponent(params.tool), principal, runtime)),
);
