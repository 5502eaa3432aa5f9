import { listHeldCalls } from "@/lib/gateway/probes";
import { toResponse } from "@/lib/http/answer";
import { withApiToken } from "@/lib/auth/token-guard";

export const dynamic = "force-dynamic";

// GET /api/v1/tools/{tool}/held – the token's scope's held calls of a client-run tool, for its probe (lib/gateway/probes.ts)
export const GET = withApiToken<{ tool: string }>(async (request, { params, principal, runtime }) =>
  toResponse(await listHeldCalls(new URL(request.url).searchParams, decodeURIComponent(params.tool), principal, runtime)),
);
