import { createHash } from "node:crypto";
import type { PrismaClient } from "@/generated/prisma/client";

/**
 * Failed sign-ins per account, kept in the database so that every server process counts the same
 * failures and a restart forgets nothing. Counted per email only: the client's address comes from
 * headers a client can set, so a limit per address could be dodged by changing them. The table
 * holds a SHA-256 of the normalized email, not the address.
 */
export const MAX_FAILURES = 10;
export const WINDOW_MS = 15 * 60 * 1000;

function accountOf(email: string): string {
  return createHash("sha256").update(email.trim().toLowerCase()).digest("hex");
}

/** Milliseconds until the next attempt is allowed; 0 when it is allowed now. */
export async function loginBlockedForMs(prisma: PrismaClient, email: string, nowMs = Date.now()): Promise<number> {
  const recent = await prisma.signInFailure.findMany({
    where: { account: accountOf(email), at: { gt: new Date(nowMs - WINDOW_MS) } },
    orderBy: { at: "desc" },
    take: MAX_FAILURES,
    select: { at: true },
  });
  if (recent.length < MAX_FAILURES) return 0;
  // the oldest of the last MAX_FAILURES leaves the window first
  return Math.max(1, recent[MAX_FAILURES - 1].at.getTime() + WINDOW_MS - nowMs);
}

export async function recordLoginFailure(prisma: PrismaClient, email: string, nowMs = Date.now()): Promise<void> {
  await prisma.signInFailure.create({ data: { account: accountOf(email), at: new Date(nowMs) } });
}

export async function clearLoginFailures(prisma: PrismaClient, email: string): Promise<void> {
  await prisma.signInFailure.deleteMany({ where: { account: accountOf(email) } });
}

/** Deletes failures that no longer count (older than the window); the background job calls it. */
export async function purgeLoginFailures(prisma: PrismaClient, nowMs = Date.now()): Promise<number> {
  return (await prisma.signInFailure.deleteMany({ where: { at: { lte: new Date(nowMs - WINDOW_MS) } } })).count;
}
