import { z } from "zod";
import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { OPERATOR_CALLER_PREFIX } from "@/lib/auth/actor";
import type { OperatorIdentity } from "@/lib/auth/roles";
import type { HttpAnswer } from "@/lib/http/answer";
import { badRequest, problemAnswer } from "@/lib/http/problem";
import { MAX_BODY_BYTES } from "@/lib/http/read-body";
import { isValidScope } from "@/lib/idempotency/key-rules";
import type { Runtime } from "@/lib/server/runtime";
import { gatewayRequest, idempotencyKeyValue } from "./gateway-request";
import { invokeTool } from "./invoke-tool";

/** What the console's invoke form sends. The arguments stay text: the gateway parses them as it would a caller's body. */
export const consoleInvokeSchema = z.strictObject({
  tool: z.string().min(1).max(200),
  scope: z.string(),
  /** absent or empty: the call goes out without an Idempotency-Key header */
  key: z.string().max(1_000).nullish(),
  session: z.string().max(1_000).nullish(),
  arguments: z.string().max(MAX_BODY_BYTES),
});
export type ConsoleInvokeInput = z.output<typeof consoleInvokeSchema>;

/** The headers of a gateway answer an operator needs to read it. */
export const SHOWN_HEADERS = ["Content-Type", "Idempotent-Replayed", "Idempotency-Key", "Idemgate-Execution-Id", "Retry-After"] as const;

/** The gateway's answer, exactly as an API caller would have received it. */
export interface GatewayExchange {
  request: { method: "POST"; path: string; headers: Record<string, string>; body: string };
  response: { status: number; headers: Record<string, string>; body: string };
}

/** The principal an operator's console call runs as: the chosen tenant's scope, the operator named as caller. */
export function operatorPrincipal(operator: OperatorIdentity, scope: string) {
  return { tokenId: `${OPERATOR_CALLER_PREFIX}${operator.email}`, scope };
}

/**
 * Runs a tool for an operator through the gateway path (invokeTool: the same header parsing,
 * argument validation, engine, audit and error mapping as POST /api/v1/tools/{tool}/invoke), so a
 * replay, a conflict or a validation error shows up in the console exactly as a caller sees it.
 */
export async function consoleInvoke(input: ConsoleInvokeInput, operator: OperatorIdentity, runtime: Runtime): Promise<GatewayExchange> {
  if (!isValidScope(input.scope)) {
    throw badRequest("invalid_request", `scope ${JSON.stringify(input.scope)} is invalid: use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit`);
  }
  const path = `/api/v1/tools/${encodeURIComponent(input.tool)}/invoke`;
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (input.key) headers["Idempotency-Key"] = idempotencyKeyValue(input.key);
  if (input.session) headers["Idemgate-Session"] = input.session;

  let request: Request;
  try {
    request = new Request(`http://gateway.invalid${path}`, { method: "POST", headers, body: input.arguments });
  } catch {
    // what an HTTP client could not send either (line breaks, characters beyond Latin-1)
    throw badRequest("invalid_header", "the Idempotency-Key or session cannot be sent as an HTTP header: use printable ASCII");
  }

  let answer: HttpAnswer;
  try {
    answer = await invokeTool(gatewayRequest(request), input.tool, operatorPrincipal(operator, input.scope), runtime);
  } catch (err) {
    answer = problemAnswer(err, path);
  }
  const answered = new Headers(answer.headers);
  const shown: Record<string, string> = {};
  for (const name of SHOWN_HEADERS) {
    const value = answered.get(name);
    if (value !== null) shown[name] = value;
  }
  // the call has run: an operator who lost its answer to a failed trail write might run a keyless
  // call again, so the answer is returned regardless (the execution's own row still names them)
  await recordOperatorAction(runtime.db.prisma, {
    actor: operator.email,
    action: "invoke",
    reason: `ran ${input.tool} from the console`,
    scope: input.scope,
    key: input.key || null,
    // the answer's facts, not its body nor the arguments: those stay on the execution's row
    after: {
      tool: input.tool,
      status: answer.status,
      executionId: shown["Idemgate-Execution-Id"] ?? null,
      replayed: shown["Idempotent-Replayed"] === "true",
    },
  }).catch((err) => console.error(`idemgate: the audit trail did not record a console call to ${input.tool}: ${err instanceof Error ? err.message : String(err)}`));
  return {
    request: { method: "POST", path, headers, body: input.arguments },
    response: { status: answer.status, headers: shown, body: answer.body },
  };
}
