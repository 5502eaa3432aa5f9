import "server-only";
import { getIronSession, type SessionOptions } from "iron-session";
import { cookies } from "next/headers";
import { getRuntime } from "@/lib/runtime";
import { sessionSecret } from "./secret";
import { findOperator, type OperatorIdentity } from "./operators";

interface SessionData {
  operatorId?: string;
}

export const SESSION_COOKIE = "idemgate_session";
const SESSION_TTL_SECONDS = 12 * 60 * 60;

async function options(): Promise<SessionOptions> {
  const runtime = await getRuntime();
  return {
    password: sessionSecret(runtime.config),
    cookieName: SESSION_COOKIE,
    ttl: SESSION_TTL_SECONDS,
    cookieOptions: {
      httpOnly: true,
      sameSite: "lax",
      // Secure when served over HTTPS; a plain-HTTP local install would otherwise never keep a session.
      secure: process.env.IDEMGATE_SECURE_COOKIES === "1",
      path: "/",
    },
  };
}

async function session() {
  return getIronSession<SessionData>(await cookies(), await options());
}

/** The signed-in operator, re-read from the database so a disabled account loses access at once. */
export async function currentOperator(): Promise<OperatorIdentity | null> {
  const s = await session();
  if (!s.operatorId) return null;
  const runtime = await getRuntime();
  return findOperator(runtime.db.prisma, s.operatorId);
}

export async function startSession(operatorId: string): Promise<void> {
  const s = await session();
  s.operatorId = operatorId;
  await s.save();
}

export async function endSession(): Promise<void> {
  const s = await session();
  s.destroy();
}
