import type { PrismaClient } from "@/generated/prisma/client";
import { beginSignInAttempt, signInSucceeded, withdrawSignInAttempt, type LimitKind } from "./login-limiter";
import { verifyOperatorCredentials } from "./operators";
import type { OperatorIdentity } from "./roles";
import { isIdemgateError } from "@/lib/idempotency/errors";
import { passwordHashingGate, type HashingGate } from "./passwords";

export type SignInResult =
  | { ok: true; operator: OperatorIdentity }
  | { ok: false; reason: "invalid" }
  | { ok: false; reason: "blocked"; limit: LimitKind; waitMs: number }
  | { ok: false; reason: "busy" };

export interface SignInInput {
  email: string;
  password: string;
  /** the client's address when a trusted proxy tells it (lib/http/client-address.ts), else null */
  address: string | null;
  nowMs?: number;
  gate?: HashingGate;
}

/**
 * One sign-in: the attempt is counted first (lib/auth/login-limiter.ts), then the password is
 * checked under the process's hashing gate. A refused attempt costs no hashing; an attempt the gate
 * turns away is withdrawn, so it neither counts nor blocks anyone.
 */
export async function attemptSignIn(prisma: PrismaClient, input: SignInInput): Promise<SignInResult> {
  const decision = await beginSignInAttempt(prisma, input.email, input.address, input.nowMs);
  if (!decision.allowed) return { ok: false, reason: "blocked", limit: decision.limit, waitMs: decision.waitMs };
  let operator: OperatorIdentity | null;
  try {
    operator = await verifyOperatorCredentials(prisma, input.email, input.password, input.gate ?? passwordHashingGate());
  } catch (err) {
    if (!isIdemgateError(err, "password_check_busy")) throw err;
    await withdrawSignInAttempt(prisma, decision.attempt);
    return { ok: false, reason: "busy" };
  }
  if (!operator) return { ok: false, reason: "invalid" };
  await signInSucceeded(prisma, decision.attempt);
  return { ok: true, operator };
}

/** What the sign-in form says for a refusal. */
export function signInMessage(result: Exclude<SignInResult, { ok: true }>): string {
  switch (result.reason) {
    case "invalid":
      return "That email and password do not match an active account.";
    case "busy":
      return "The server is checking too many sign-ins at once. Try again in a few seconds.";
    case "blocked": {
      const minutes = Math.max(1, Math.ceil(result.waitMs / 60_000));
      const whose = result.limit === "account" ? "for this email" : "from this address";
      return `Too many failed sign-ins ${whose}. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`;
    }
  }
}
