import { gatewayRequest } from "@/lib/gateway/invoke-tool";
import { recordClientReplays } from "@/lib/gateway/record-client-replays";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// POST /api/v1/replays – record replays a client answered from its own cache (lib/gateway/record-client-replays.ts)
export const POST = withApiToken<Record<string, never>>(async (request, { principal, runtime }) =>
  toResponse(await recordClientReplays(gatewayRequest(request), "", principal, runtime)),
);
