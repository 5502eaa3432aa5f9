"use server";

import { headers } from "next/headers";
import { redirect } from "next/navigation";
import { safeNextPath } from "@/lib/auth/safe-next-path";
import { endSession, startSession } from "@/lib/auth/session";
import { attemptSignIn, signInMessage } from "@/lib/auth/sign-in";
import { clientAddress } from "@/lib/http/client-address";
import { getRuntime } from "@/lib/server/runtime";

export interface SignInState {
  error: string | null;
  email: string;
}

export async function signIn(_prev: SignInState, form: FormData): Promise<SignInState> {
  const email = String(form.get("email") ?? "").trim();
  const password = String(form.get("password") ?? "");
  if (!email || !password) return { error: "Enter your email and password.", email };

  const runtime = await getRuntime();
  const address = clientAddress(await headers(), runtime.config.trustedProxies);
  const result = await attemptSignIn(runtime.db.prisma, { email, password, address });
  if (!result.ok) return { error: signInMessage(result), email };
  await startSession(result.operator.id);
  redirect(safeNextPath(form.get("next")));
}

export async function signOut(): Promise<void> {
  await endSession();
  redirect("/login");
}
