import { z } from "zod";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { SettleResult, SettleTarget } from "@/lib/idempotency/engine";
import { ExecutionNotFoundError } from "@/lib/idempotency/errors";
import type { HttpAnswer } from "@/lib/http/answer";
import { badRequest } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import { callHeaders, callRequest, parsedBody, waitApplied, type GatewayRequest } from "./gateway-request";

// The reservation API for tools that run in their caller's process (DESIGN.md § "Tools that run
// where they live"): reserve, then complete / release / heartbeat the execution. One handler per
// action, served by the gateway's fast path (fast-invoke.ts) and the App Router routes alike.

const JSON_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-store" };

/** An execution id as reservations hand them out (a UUID); anything else names no reservation. */
const EXECUTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const reserveBody = z.strictObject({ arguments: z.record(z.string(), z.unknown()).optional() });
const token = z.number().int().nonnegative().describe("the token the reservation was given");
export const completeBody = z.strictObject({
  token,
  status: z
    .number()
    .int()
    .refine((s) => (s >= 200 && s <= 299) || (s >= 400 && s <= 499), "a result's status is 200–299, or 400–499 for a final error")
    .optional()
    .describe("200 unless given; 400–499: a final error (a declined card), stored and replayed like a result"),
  body: z.unknown().describe("the result, any JSON; replayed to every duplicate"),
});
export const releaseBody = z.strictObject({
  token,
  outcome: z.enum(["not_run", "unknown"]).describe("not_run: nothing happened, the key is freed; unknown: it may have happened, the key is held until a probe or an operator decides"),
  note: z.string().max(1_000).optional().describe("for operators: why"),
});
export const heartbeatBody = z.strictObject({ token });

/** POST /api/v1/tools/{tool}/reservations for an authenticated caller. */
export async function reserveTool(request: GatewayRequest, toolName: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const tool = runtime.registry.get(toolName);
  if (tool.runs !== "client") {
    throw badRequest(
      "invalid_request",
      `${tool.name} is run by Idemgate, not by its caller: invoke it with POST /api/v1/tools/${tool.name}/invoke (reservations are for tools declared with runs: client)`,
    );
  }
  const call = callHeaders(request.headers, principal, true);
  const body = parsedBody(reserveBody, await request.json(), "reservation");
  const args = runtime.registry.parseArgs(tool, body.arguments);
  const reserving = runtime.engine.reserve(tool, callRequest(call, principal, args));
  const answer = async (): Promise<HttpAnswer> => {
    const r = await reserving;
    if (r.kind === "reserved") {
      return {
        status: 201,
        headers: { ...JSON_HEADERS, "Idempotency-Key": r.key, "Idemgate-Execution-Id": r.executionId },
        body: JSON.stringify({ state: "reserved", executionId: r.executionId, token: r.token, ...lease(r.leaseUntilMs) }),
      };
    }
    // a result stored under another key (an advisory key answered by its arguments window) says
    // nothing of how long this key replays it: no expiresInMs, so no client keeps it
    const own = r.record.key === r.key && !r.fallback;
    return {
      status: 200,
      headers: { ...JSON_HEADERS, "Idempotency-Key": r.key, "Idempotent-Replayed": "true" },
      body: doneBody(r.status, r.body, r.record.executionId, own ? r.record.expiresAtMs : null),
    };
  };
  if (call.waitSeconds === null) return answer();
  return waitApplied(call.waitSeconds, `/api/v1/tools/${encodeURIComponent(toolName)}/reservations`, answer);
}

export type SettleAction = "complete" | "release" | "heartbeat";

export const SETTLE_ACTIONS: readonly SettleAction[] = ["complete", "release", "heartbeat"];

/** POST /api/v1/executions/{executionId}/complete | release | heartbeat for an authenticated caller. */
export async function settleExecution(
  request: GatewayRequest,
  executionId: string,
  action: SettleAction,
  principal: TokenPrincipal,
  runtime: Runtime,
): Promise<HttpAnswer> {
  const raw = await request.json();
  if (!EXECUTION_ID.test(executionId)) throw new ExecutionNotFoundError();
  const policyOf = (name: string) => (runtime.registry.has(name) ? runtime.registry.get(name) : undefined);
  let result: SettleResult;
  if (action === "complete") {
    const body = parsedBody(completeBody, raw, "complete");
    if (typeof raw !== "object" || raw === null || !Object.hasOwn(raw, "body")) throw badRequest("invalid_request", "invalid complete body: body: the result is required (null for none)");
    const target: SettleTarget = { scope: principal.scope, executionId, token: body.token, policyOf };
    result = await runtime.engine.completeExecution(target, { status: body.status ?? 200, body: body.body });
  } else if (action === "release") {
    const body = parsedBody(releaseBody, raw, "release");
    result = await runtime.engine.releaseExecution({ scope: principal.scope, executionId, token: body.token, policyOf }, body.outcome, body.note ?? null);
  } else {
    const body = parsedBody(heartbeatBody, raw, "heartbeat");
    result = await runtime.engine.heartbeatExecution({ scope: principal.scope, executionId, token: body.token, policyOf });
  }
  return settleAnswer(result);
}

/**
 * A reservation's lease: when it ends, and how much of it is left by this server's clock when it
 * answers (leaseMs), so a client schedules its heartbeats without trusting its own clock to agree.
 */
function lease(leaseUntilMs: number): { leaseUntil: string; leaseMs: number } {
  return { leaseUntil: new Date(leaseUntilMs).toISOString(), leaseMs: Math.max(0, leaseUntilMs - Date.now()) };
}

/**
 * A done answer: the stored status and body, the execution whose result it is, and how much of the
 * key's TTL is left by this server's clock (expiresInMs), which is how long a client may answer
 * this call (the same key and arguments) from its own cache: a done record never changes before it
 * expires. The body is the stored JSON text, sent as it is.
 */
function doneBody(status: number, body: string, executionId: string | null, expiresAtMs: number | null): string {
  const execution = executionId === null ? "" : `,"executionId":${JSON.stringify(executionId)}`;
  const expires = expiresAtMs === null ? "" : `,"expiresInMs":${Math.max(0, expiresAtMs - Date.now())}`;
  return `{"state":"done","status":${status},"body":${body}${execution}${expires}}`;
}

function settleAnswer(result: SettleResult): HttpAnswer {
  switch (result.state) {
    case "done":
      return {
        status: 200,
        headers: { ...JSON_HEADERS, ...(result.replayed ? { "Idempotent-Replayed": "true" } : {}) },
        body: doneBody(result.status, result.body, result.executionId, result.expiresAtMs),
      };
    case "reserved":
      return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ state: "reserved", ...lease(result.leaseUntilMs) }) };
    default:
      return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ state: result.state }) };
  }
}
