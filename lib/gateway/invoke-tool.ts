import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { InvokeResult } from "@/lib/idempotency/engine";
import type { HttpAnswer } from "@/lib/http/answer";
import { problemAnswer } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import { idempotencyKeyHeader, keySourceHeader, preferredWaitSeconds, sessionHeader, type GatewayRequest } from "./gateway-request";

/** POST /api/v1/tools/{tool}/invoke for an authenticated caller. */
export async function invokeTool(request: GatewayRequest, toolName: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  // one registry for the whole call: a reload swaps runtime.registry, and a call already running
  // finishes under the definition it started with
  const registry = runtime.registry;
  const tool = registry.get(toolName);
  // a tool run by its caller is refused before anything else is read: 400 naming how it runs
  const run = registry.runnerFor(tool, runtime.db.prisma);
  const key = idempotencyKeyHeader(request.headers);
  const session = sessionHeader(request.headers);
  const keySource = keySourceHeader(request.headers, principal);
  const waitSeconds = tool.kind === "write" ? preferredWaitSeconds(request.headers) : null;
  const args = registry.parseArgs(tool, await request.json());
  const invoked = runtime.engine.invoke(tool, run, {
    scope: principal.scope,
    key,
    args,
    session,
    caller: principal.tokenId,
    keySource,
    waitMs: waitSeconds === null ? undefined : waitSeconds * 1000,
  });
  if (waitSeconds === null) return resultAnswer(await invoked);
  // the preference was honoured whatever the answer: say so on results and problems alike
  const applied = { "Preference-Applied": `wait=${waitSeconds}` };
  let answer: HttpAnswer;
  try {
    answer = resultAnswer(await invoked);
  } catch (err) {
    answer = problemAnswer(err, `/api/v1/tools/${encodeURIComponent(toolName)}/invoke`);
  }
  return { ...answer, headers: { ...answer.headers, ...applied } };
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
