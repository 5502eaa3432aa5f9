import "server-only";
import { headers } from "next/headers";
import { redirect } from "next/navigation";
import type { OperatorIdentity } from "./roles";
import { currentOperator } from "./session";

/** Set by proxy.ts on every console request, so a server component knows where to come back to. */
export const PATH_HEADER = "x-idemgate-path";

/**
 * The signed-in operator, or a redirect to the sign-in page that comes back here afterwards.
 * Every console page calls this itself: layouts are not re-rendered on client-side navigation,
 * so a check in the layout alone would not run for every page.
 */
export async function requireOperator(): Promise<OperatorIdentity> {
  const operator = await currentOperator();
  if (operator) return operator;
  const path = (await headers()).get(PATH_HEADER) ?? "/";
  redirect(path === "/" ? "/login" : `/login?next=${encodeURIComponent(path)}`);
}
