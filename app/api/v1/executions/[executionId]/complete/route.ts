import { gatewayRequest } from "@/lib/gateway/invoke-tool";
import { settleExecution } from "@/lib/gateway/reservations";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// POST /api/v1/executions/{executionId}/complete – settle a reservation (lib/gateway/reservations.ts)
export const POST = withApiToken<{ executionId: string }>(async (request, { params, principal, runtime }) =>
  toResponse(await settleExecution(gatewayRequest(request), decodeURIComponent(params.executionId), "complete", principal, runtime)),
);
