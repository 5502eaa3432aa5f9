import "server-only";
import { cookies, headers } from "next/headers";
import { getRuntime } from "@/lib/server/runtime";
import { cookieOperator, cookieSecure, endCookieSession, startCookieSession, type SessionCookieOptions } from "./console-sessions";
import type { OperatorIdentity } from "./roles";
import { sessionSecret } from "./secret";

export { SESSION_COOKIE } from "./console-sessions";

/**
 * The cookie is Secure when this request came over HTTPS (directly, or through a trusted proxy that
 * says so), or always with IDEMGATE_SECURE_COOKIES=1. `forWriting`: only a cookie being set or
 * cleared needs to know.
 */
async function cookieOptions(forWriting: boolean): Promise<SessionCookieOptions> {
  const runtime = await getRuntime();
  const secure = forWriting && cookieSecure(await headers(), runtime.config.trustedProxies);
  return { password: sessionSecret(runtime.config), secure };
}

/**
 * The signed-in operator: a live session (lib/auth/console-sessions.ts) of an account that is not
 * disabled, looked up on every request, so signing out or disabling ends access at once.
 */
export async function currentOperator(): Promise<OperatorIdentity | null> {
  const runtime = await getRuntime();
  return cookieOperator(await cookies(), runtime.db.prisma, await cookieOptions(false));
}

export async function startSession(operatorId: string): Promise<void> {
  const runtime = await getRuntime();
  await startCookieSession(await cookies(), runtime.db.prisma, operatorId, await cookieOptions(true));
}

/** Signs out: the session ends on the server too, so the cookie is worthless even if kept. */
export async function endSession(): Promise<void> {
  const runtime = await getRuntime();
  await endCookieSession(await cookies(), runtime.db.prisma, await cookieOptions(true));
}
