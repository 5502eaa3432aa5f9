import type { Principal } from "./guard";

/** How the audit trail names whoever acted. */
export function actorOf(principal: Principal): string {
  if (principal.kind === "operator") return principal.operator.email;
  // the command line names itself (`cli:<user>@<host>`), as when it opens the database directly
  if (principal.kind === "cli") return principal.actor;
  return `token:${principal.token.tokenId}`;
}

/** How the audit log names the caller of a tool call an operator made from the console: `operator:<email>`. */
export const OPERATOR_CALLER_PREFIX = "operator:";
