"use server";

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

export async function signIn(_prev: SignInState, form: FormData): Promise<SignInState> {
  const email = String(form.get("email") ?? "").trim();
  const password = String(form.get("password") ?? "");
  if (!email || !password) return { error: "Enter your email and password.", email };

  const runtime = await getRuntime();
  const { prisma } = runtime.db;
  const waitMs = await loginBlockedForMs(prisma, email);
  if (waitMs > 0) {
    const minutes = Math.max(1, Math.ceil(waitMs / 60_000));
    return { error: `Too many failed sign-ins for this email. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`, email };
  }

  const operator = await verifyOperatorCredentials(prisma, email, password);
  if (!operator) {
    await recordLoginFailure(prisma, email);
    return { error: "That email and password do not match an active account.", email };
  }
  await clearLoginFailures(prisma, email);
  await startSession(operator.id);
  redirect(safeNextPath(form.get("next")));
}

export async function signOut(): Promise<void> {
  await endSession();
  redirect("/login");
}
