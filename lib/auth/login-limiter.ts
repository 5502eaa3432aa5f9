import { createHash } from "node:crypto";
import type { PrismaClient } from "@/generated/prisma/client";

/**
 * Sign-in attempts, kept in the database so that every server process counts the same attempts and
 * a restart forgets nothing. The table holds SHA-256 digests of the buckets an attempt counts in,
 * never an email or an address.
 *
 * An attempt is counted before its password is checked: it writes its rows (committed), then
 * counts the rows in the window. Whoever committed k-th sees at least k rows, so of any number of
 * parallel guesses at most the limit get their password checked; the rest are refused without a
 * check, and withdraw their rows so that being refused does not extend a block. (A burst larger
 * than what is left of the limit may be refused whole, as its attempts see each other's rows before
 * they are withdrawn; what it did not use stays available.) A wrong password leaves the attempt's
 * rows in place (they are the failure); a right one clears the account's.
 *
 * Which buckets count depends on whether the client's address can be known:
 * - Without a trusted proxy (IDEMGATE_TRUSTED_PROXY unset or 0) the address comes from headers the
 *   client sets, so only the account counts: MAX_FAILURES attempts per email per window. The
 *   trade-off: anyone who can reach /login can keep one account (the seeded admin's, say) blocked by
 *   failing on purpose; the block lasts until the oldest failure is WINDOW_MS old, and the CLI, which
 *   signs no one in, is not affected.
 * - Behind a trusted proxy the address is known, and the limits are per address: MAX_FAILURES per
 *   account from one address, MAX_FAILURES_PER_ADDRESS from one address over all accounts (unknown
 *   emails included). An attacker blocks the account for their own address only. One account also
 *   has MAX_FAILURES_PER_ACCOUNT over all addresses, a ceiling on guesses spread over many addresses
 *   which an attacker needs that many addresses' worth of failures to reach.
 */
export const MAX_FAILURES = 10;
export const MAX_FAILURES_PER_ADDRESS = 30;
export const MAX_FAILURES_PER_ACCOUNT = 100;
export const WINDOW_MS = 15 * 60 * 1000;

/** what a refusal names: the account (the email) or the client's address */
export type LimitKind = "account" | "address";

interface Bucket {
  digest: string;
  max: number;
  kind: LimitKind;
  /** a right password clears it */
  clearedBySuccess: boolean;
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function bucketsOf(email: string, address: string | null): Bucket[] {
  const account = normalizeEmail(email);
  // the account's own digest is that of the bare email, as the limiter has always stored it
  if (address === null) return [{ digest: digest(account), max: MAX_FAILURES, kind: "account", clearedBySuccess: true }];
  const from = address.toLowerCase();
  return [
    { digest: digest(`account-address\n${account}\n${from}`), max: MAX_FAILURES, kind: "account", clearedBySuccess: true },
    { digest: digest(`address\n${from}`), max: MAX_FAILURES_PER_ADDRESS, kind: "address", clearedBySuccess: false },
    { digest: digest(account), max: MAX_FAILURES_PER_ACCOUNT, kind: "account", clearedBySuccess: true },
  ];
}

/** A counted attempt whose password may now be checked. */
export interface SignInAttempt {
  readonly rowIds: bigint[];
  readonly clearOnSuccess: string[];
}

export type AttemptDecision = { allowed: true; attempt: SignInAttempt } | { allowed: false; limit: LimitKind; waitMs: number };

/**
 * Counts one sign-in attempt for `email` from `address` (null: the address is not known) and says
 * whether its password may be checked, or how long until an attempt is allowed.
 */
export async function beginSignInAttempt(prisma: PrismaClient, email: string, address: string | null, nowMs = Date.now()): Promise<AttemptDecision> {
  const buckets = bucketsOf(email, address);
  const at = new Date(nowMs);
  const rows = await prisma.signInFailure.createManyAndReturn({ data: buckets.map((b) => ({ account: b.digest, at })), select: { id: true } });
  const rowIds = rows.map((r) => r.id);
  // a second statement, so it sees every attempt committed before this one's rows
  const since = new Date(nowMs - WINDOW_MS);
  const counts = await prisma.signInFailure.groupBy({
    by: ["account"],
    where: { account: { in: buckets.map((b) => b.digest) }, at: { gt: since } },
    _count: { _all: true },
  });
  const countOf = new Map(counts.map((c) => [c.account, c._count._all]));
  const over = buckets.filter((b) => (countOf.get(b.digest) ?? 0) > b.max);
  if (over.length === 0) {
    return { allowed: true, attempt: { rowIds, clearOnSuccess: buckets.filter((b) => b.clearedBySuccess).map((b) => b.digest) } };
  }
  await prisma.signInFailure.deleteMany({ where: { id: { in: rowIds } } });
  let refusal: { limit: LimitKind; waitMs: number } | null = null;
  for (const bucket of over) {
    // the bucket allows an attempt again once its max-th newest row (this one's left out) leaves the window
    const row = await prisma.signInFailure.findFirst({
      where: { account: bucket.digest, at: { gt: since } },
      orderBy: { at: "desc" },
      skip: bucket.max - 1,
      select: { at: true },
    });
    const waitMs = Math.max(1, row ? row.at.getTime() + WINDOW_MS - nowMs : 1);
    if (!refusal || waitMs > refusal.waitMs) refusal = { limit: bucket.kind, waitMs };
  }
  return { allowed: false, ...refusal! };
}

/** The password was not checked after all (the process was too busy): the attempt does not count. */
export async function withdrawSignInAttempt(prisma: PrismaClient, attempt: SignInAttempt): Promise<void> {
  await prisma.signInFailure.deleteMany({ where: { id: { in: attempt.rowIds } } });
}

/** The password was right: the account's failures are forgotten (an address's are not). */
export async function signInSucceeded(prisma: PrismaClient, attempt: SignInAttempt): Promise<void> {
  await prisma.signInFailure.deleteMany({ where: { OR: [{ id: { in: attempt.rowIds } }, { account: { in: attempt.clearOnSuccess } }] } });
}

/** Deletes attempts that no longer count (older than the window); the background job calls it. */
export async function purgeLoginFailures(prisma: PrismaClient, nowMs = Date.now()): Promise<number> {
  return (await prisma.signInFailure.deleteMany({ where: { at: { lte: new Date(nowMs - WINDOW_MS) } } })).count;
}
