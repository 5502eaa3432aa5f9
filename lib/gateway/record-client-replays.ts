import { z } from "zod";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { HttpAnswer } from "@/lib/http/answer";
import { recordIgnoredClientReplays } from "@/lib/server/metrics";
import type { Runtime } from "@/lib/server/runtime";
import { parsedBody, type GatewayRequest } from "./gateway-request";

// POST /api/v1/replays – replays a client answered from its own cache of done results (lib/client's
// replay cache), reported afterwards in batches so the audit log holds them as suppressions.

/** Items one report may carry (the client sends at most this many). */
export const MAX_CLIENT_REPLAYS = 500;

const EXECUTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const clientReplaysBody = z.strictObject({
  replays: z
    .array(
      z.strictObject({
        tool: z.string().min(1).max(200).describe("the tool the replay was of"),
        key: z.string().min(1).max(255).regex(/^[\x20-\x7e]+$/, "1–255 printable ASCII characters").describe("its Idempotency-Key"),
        executionId: z.string().regex(EXECUTION_ID, "an execution id (a UUID)").describe("the execution whose result was replayed, as the done answer named it"),
        ageMs: z
          .number()
          .int()
          .nonnegative()
          .max(7 * 24 * 60 * 60 * 1000)
          .describe("how long before this report the replay happened, by the client's clock"),
        session: z.string().regex(/^[\x21-\x7e]{1,200}$/, "1–200 visible ASCII characters").optional().describe("the Idemgate-Session the call would have sent"),
      }),
    )
    .max(MAX_CLIENT_REPLAYS),
});

/**
 * POST /api/v1/replays for an authenticated caller: each replay whose key in the token's scope is
 * done with that execution's result is written to the audit log as a replay suppression; the rest
 * (another scope's key, another execution, an expired or unknown key) is ignored and counted.
 * Answers `{"recorded":n,"ignored":m}`; a malformed report is a 400 and records nothing.
 */
export async function recordClientReplays(request: GatewayRequest, _segment: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const body = parsedBody(clientReplaysBody, await request.json(), "replays");
  const counts = await runtime.engine.recordClientReplays(principal.scope, principal.tokenId, body.replays);
  recordIgnoredClientReplays(counts.ignored);
  return { status: 200, headers: { "Content-Type": "application/json", "Cache-Control": "no-store" }, body: JSON.stringify(counts) };
}
