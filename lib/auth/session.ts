import "server-only";
import { getIronSession, type SessionOptions } from "iron-session";
import { cookies, headers } from "next/headers";
import { servedOverHttps } from "@/lib/http/served-over-https";
import { getRuntime } from "@/lib/runtime";
import { sessionSecret } from "./secret";
import { findOperator, type OperatorIdentity } from "./operators";

interface SessionData {
  operatorId?: string;
}

export const SESSION_COOKIE = "idemgate_session";
const SESSION_TTL_SECONDS = 12 * 60 * 60;

/**
 * `secure`: the cookie is set with the Secure attribute, for a request that came over HTTPS
 * (directly, or through a trusted proxy that says so), or always with IDEMGATE_SECURE_COOKIES=1.
 */
async function options(secure = false): Promise<SessionOptions> {
  const runtime = await getRuntime();
  return {
    password: sessionSecret(runtime.config),
    cookieName: SESSION_COOKIE,
    ttl: SESSION_TTL_SECONDS,
    cookieOptions: {
      httpOnly: true,
      sameSite: "lax",
      // Secure only when served over HTTPS: a plain-HTTP local install would otherwise never keep a session.
      secure: secure || process.env.IDEMGATE_SECURE_COOKIES === "1",
      path: "/",
    },
  };
}

/** `forWriting`: the cookie will be set or cleared, so whether this request came over HTTPS matters. */
async function session(forWriting = false) {
  let secure = false;
  if (forWriting) {
    const runtime = await getRuntime();
    secure = servedOverHttps(await headers(), runtime.config.trustedProxies);
  }
  return getIronSession<SessionData>(await cookies(), await options(secure));
}

/** The signed-in operator, re-read from the database so a disabled account loses access at once. */
export async function currentOperator(): Promise<OperatorIdentity | null> {
  const s = await session();
  if (!s.operatorId) return null;
  const runtime = await getRuntime();
  return findOperator(runtime.db.prisma, s.operatorId);
}

export async function startSession(operatorId: string): Promise<void> {
  const s = await session(true);
  s.operatorId = operatorId;
  await s.save();
}

export async function endSession(): Promise<void> {
  const s = await session(true);
  s.destroy();
}
