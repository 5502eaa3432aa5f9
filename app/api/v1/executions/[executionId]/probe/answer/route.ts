import { gatewayRequest } from "@/lib/gateway/invoke-tool";
import { answerProbe } from "@/lib/gateway/probes";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// POST /api/v1/executions/{executionId}/probe/answer – the probe of a held client-run call (lib/gateway/probes.ts)
export const POST = withApiToken<{ executionId: string }>(async (request, { params, principal, runtime }) =>
  toResponse(await answerProbe(gatewayRequest(request), decodeURIComponent(params.executionId), principal, runtime)),
);
