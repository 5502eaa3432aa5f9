import type { Principal } from "./guard";

/** How the audit trail names whoever acted. */
export function actorOf(principal: Principal): string {
  return principal.kind === "operator" ? principal.operator.email : `token:${principal.token.tokenId}`;
}
