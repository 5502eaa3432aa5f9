import type { Principal } from "./guard";

/** How the audit trail names whoever acted. */
export function actorOf(principal: Principal): string {
  return principal.kind === "operator" ? principal.operator.email : `token:${principal.token.tokenId}`;
}

/** How the audit log names the caller of a tool call an operator made from the console: `operator:<email>`. */
export const OPERATOR_CALLER_PREFIX = "operator:";
