"use server";

import { headers } from "next/headers";
import { redirect } from "next/navigation";
import { clearLoginFailures, loginBlockedForMs, recordLoginFailure } from "@/lib/auth/login-limiter";
import { verifyOperatorCredentials } from "@/lib/auth/operators";
import { safeNextPath } from "@/lib/auth/safe-next-path";
import { endSession, startSession } from "@/lib/auth/session";
import { getRuntime } from "@/lib/runtime";

export interface SignInState {
  error: string | null;
  email: string;
}

async function clientAddress(): Promise<string> {
  const h = await headers();
  return h.get("x-forwarded-for")?.split(",")[0]?.trim() || h.get("x-real-ip") || "unknown";
}

export async function signIn(_prev: SignInState, form: FormData): Promise<SignInState> {
  const email = String(form.get("email") ?? "").trim();
  const password = String(form.get("password") ?? "");
  if (!email || !password) return { error: "Enter your email and password.", email };

  const ip = await clientAddress();
  const waitMs = loginBlockedForMs(email, ip);
  if (waitMs > 0) {
    const minutes = Math.max(1, Math.ceil(waitMs / 60_000));
    return { error: `Too many failed sign-ins for this email. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`, email };
  }

  const runtime = await getRuntime();
  const operator = await verifyOperatorCredentials(runtime.db.prisma, email, password);
  if (!operator) {
    recordLoginFailure(email, ip);
    return { error: "That email and password do not match an active account.", email };
  }
  clearLoginFailures(email, ip);
  await startSession(operator.id);
  redirect(safeNextPath(form.get("next")));
}

export async function signOut(): Promise<void> {
  await endSession();
  redirect("/login");
}
