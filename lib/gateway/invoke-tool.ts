import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { InvokeResult } from "@/lib/idempotency/engine";
import type { HttpAnswer } from "@/lib/http/answer";
import type { Runtime } from "@/lib/server/runtime";
import { callHeaders, callRequest, waitApplied, type GatewayRequest } from "./gateway-request";

/** POST /api/v1/tools/{tool}/invoke for an authenticated caller. */
export async function invokeTool(request: GatewayRequest, toolName: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  // one registry for the whole call: a reload swaps runtime.registry, and a call already running
  // finishes under the definition it started with
  const registry = runtime.registry;
  const tool = registry.get(toolName);
  // a tool run by its caller is refused before anything else is read: 400 naming how it runs
  const run = registry.runnerFor(tool, runtime.db.prisma);
  const call = callHeaders(request.headers, principal, tool.kind === "write");
  const args = registry.parseArgs(tool, await request.json());
  const invoked = runtime.engine.invoke(tool, run, callRequest(call, principal, args));
  if (call.waitSeconds === null) return resultAnswer(await invoked);
  return waitApplied(call.waitSeconds, `/api/v1/tools/${encodeURIComponent(toolName)}/invoke`, async () => resultAnswer(await invoked));
}

export function resultAnswer(result: InvokeResult): HttpAnswer {
  const headers: Record<string, string> = { "Content-Type": "application/json", "Cache-Control": "no-store" };
  if (result.kind === "replayed") headers["Idempotent-Replayed"] = "true";
  if (result.kind !== "read") {
    headers["Idempotency-Key"] = result.key;
    if (result.kind === "executed") headers["Idemgate-Execution-Id"] = result.executionId;
  }
  return { status: result.status, headers, body: result.body };
}
