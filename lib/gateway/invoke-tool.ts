import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { InvokeResult, KeySource } from "@/lib/idempotency/engine";
import type { HeaderSource, HttpAnswer } from "@/lib/http/answer";
import { badRequest } from "@/lib/http/problem";
import { readJsonBody } from "@/lib/http/read-body";
import type { Runtime } from "@/lib/runtime";

const SESSION_PATTERN = /^[\x21-\x7e]{1,200}$/;

/**
 * The Idempotency-Key header. The IETF draft makes it a Structured Field string ("…"); Stripe and
 * most clients send the bare value. Both are accepted; the quotes are not part of the key.
 */
export function idempotencyKeyHeader(headers: HeaderSource): string | null {
  const raw = headers.get("idempotency-key");
  if (raw === null) return null;
  const quoted = /^"((?:[^"\\]|\\[\\"])*)"$/.exec(raw);
  return quoted ? quoted[1].replace(/\\([\\"])/g, "$1") : raw;
}

export function sessionHeader(headers: HeaderSource): string | null {
  const raw = headers.get("idemgate-session");
  if (raw === null) return null;
  if (!SESSION_PATTERN.test(raw)) throw badRequest("invalid_header", "Idemgate-Session must be 1–200 visible ASCII characters");
  return raw;
}

/**
 * `Idemgate-Key-Source: model` marks the key as minted by a model (advisory); `orchestrator` (the
 * default) as authoritative. Without the header, a token created with advisory keys makes it model.
 */
export function keySourceHeader(headers: HeaderSource, principal: TokenPrincipal): KeySource {
  const raw = headers.get("idemgate-key-source");
  if (raw === null) return principal.advisoryKeys ? "model" : "orchestrator";
  const value = raw.trim().toLowerCase();
  if (value === "model" || value === "orchestrator") return value;
  throw badRequest("invalid_header", "Idemgate-Key-Source must be `model` (the key was minted by a model: advisory) or `orchestrator`");
}

/** A gateway call as the handler needs it: headers, and the JSON body, read only when asked for. */
export interface GatewayRequest {
  headers: HeaderSource;
  json(): Promise<unknown>;
}

export function gatewayRequest(request: Request): GatewayRequest {
  return { headers: request.headers, json: () => readJsonBody(request) };
}

/** POST /api/v1/tools/{tool}/invoke for an authenticated caller. */
export async function invokeTool(request: GatewayRequest, toolName: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const tool = runtime.registry.get(toolName);
  const key = idempotencyKeyHeader(request.headers);
  const session = sessionHeader(request.headers);
  const keySource = keySourceHeader(request.headers, principal);
  const args = runtime.registry.parseArgs(tool, await request.json());
  const result = await runtime.engine.invoke(tool, runtime.registry.runnerFor(tool, runtime.db.prisma), {
    scope: principal.scope,
    key,
    args,
    session,
    caller: principal.tokenId,
    keySource,
  });
  return resultAnswer(result);
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
