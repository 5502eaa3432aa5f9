import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import { MAX_FAILURES, WINDOW_MS } from "./login-limiter";
import { createOperator } from "./operators";
import { HashingGate } from "./passwords";
import { attemptSignIn, signInMessage, type SignInResult } from "./sign-in";

const PASSWORD = "the-right-password-1";
const T0 = Date.UTC(2026, 10, 30, 9);

function tally(results: SignInResult[]) {
  const by = { ok: 0, invalid: 0, blocked: 0, busy: 0 };
  for (const r of results) by[r.ok ? "ok" : r.reason]++;
  return by;
}

describe.each(["PostgreSQL", "PGlite"] as const)("signing in on %s", (kind) => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = kind === "PostgreSQL" ? await createTestPostgres("sign_in") : await createTestPglite();
    for (const email of ["admin@example.com", "burst@example.com", "proxied@example.com"]) {
      await createOperator(t.db.prisma, { email, password: PASSWORD, role: "operator" });
    }
  });
  afterAll(() => t?.drop());

  it(`${3 * MAX_FAILURES} parallel wrong passwords for one email: at most ${MAX_FAILURES} are checked, then the right one waits too`, async () => {
    const gate = new HashingGate(64, 64); // roomy: every attempt the limiter admits is checked
    const results = await Promise.all(
      Array.from({ length: 3 * MAX_FAILURES }, (_, i) => attemptSignIn(t.db.prisma, { email: "burst@example.com", password: `wrong-${i}`, address: null, nowMs: T0, gate })),
    );
    const by = tally(results);
    expect(by.invalid).toBeLessThanOrEqual(MAX_FAILURES);
    expect(by.invalid + by.blocked).toBe(3 * MAX_FAILURES);
    // every checked password was one argon2 verification; the blocked cost none
    expect(gate.started).toBe(by.invalid);
    // use up what the burst left: then exactly MAX_FAILURES passwords were checked in the window
    for (let i = 0; i < 2 * MAX_FAILURES; i++) {
      const next = await attemptSignIn(t.db.prisma, { email: "burst@example.com", password: "wrong", address: null, nowMs: T0 + 1, gate });
      if (!next.ok && next.reason === "blocked") break;
    }
    expect(gate.started).toBe(MAX_FAILURES);
    // and even the right password is refused until the window has passed
    const refused = await attemptSignIn(t.db.prisma, { email: "burst@example.com", password: PASSWORD, address: null, nowMs: T0 + 2, gate });
    expect(refused).toMatchObject({ ok: false, reason: "blocked", limit: "account" });
    expect(signInMessage(refused as Exclude<SignInResult, { ok: true }>)).toMatch(/^Too many failed sign-ins for this email\. Try again in 15 minutes\.$/);
    expect(await attemptSignIn(t.db.prisma, { email: "burst@example.com", password: PASSWORD, address: null, nowMs: T0 + WINDOW_MS + 10, gate })).toMatchObject({ ok: true });
  }, 120_000);

  it("a burst of sign-ins for unknown emails hashes at most the gate's width at once; the rest are told to try again and not counted", async () => {
    const gate = new HashingGate(2, 3);
    const at = T0 + 5 * WINDOW_MS; // a moment of its own
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => attemptSignIn(t.db.prisma, { email: `nobody-${i}@example.com`, password: "guess", address: null, nowMs: at, gate })),
    );
    const by = tally(results);
    expect(by.busy).toBeGreaterThan(0);
    expect(by.invalid + by.busy).toBe(40);
    // an unknown email still costs its (dummy) verification, under the same gate
    expect(gate.peakRunning).toBe(2);
    expect(gate.refused).toBe(by.busy);
    const busy = results.find((r) => !r.ok && r.reason === "busy") as Exclude<SignInResult, { ok: true }>;
    expect(signInMessage(busy)).toBe("The server is checking too many sign-ins at once. Try again in a few seconds.");
    // the turned-away attempts left no rows: only the checked ones count as failures
    expect(await t.db.prisma.signInFailure.count({ where: { at: new Date(at) } })).toBe(by.invalid);
  }, 120_000);

  it("behind a trusted proxy, failures from one address do not lock the admin out from another", async () => {
    const gate = new HashingGate(4, 64);
    const attacker = "203.0.113.66";
    const results = await Promise.all(
      Array.from({ length: 2 * MAX_FAILURES }, (_, i) => attemptSignIn(t.db.prisma, { email: "proxied@example.com", password: `wrong-${i}`, address: attacker, nowMs: T0, gate })),
    );
    expect(tally(results).invalid).toBeLessThanOrEqual(MAX_FAILURES);
    for (let i = 0; i < MAX_FAILURES; i++) await attemptSignIn(t.db.prisma, { email: "proxied@example.com", password: "wrong", address: attacker, nowMs: T0 + 1, gate });
    const fromAttacker = await attemptSignIn(t.db.prisma, { email: "proxied@example.com", password: PASSWORD, address: attacker, nowMs: T0 + 2, gate });
    expect(fromAttacker).toMatchObject({ ok: false, reason: "blocked", limit: "account" });
    expect(await attemptSignIn(t.db.prisma, { email: "proxied@example.com", password: PASSWORD, address: "198.51.100.20", nowMs: T0 + 3, gate })).toMatchObject({
      ok: true,
      operator: { email: "proxied@example.com" },
    });
  }, 120_000);

  it("without a trusted proxy the account is blocked from everywhere (the documented trade-off)", async () => {
    const gate = new HashingGate(4, 64);
    for (let i = 0; i < MAX_FAILURES; i++) {
      expect(await attemptSignIn(t.db.prisma, { email: "admin@example.com", password: `wrong-${i}`, address: null, nowMs: T0 + i, gate })).toEqual({ ok: false, reason: "invalid" });
    }
    expect(await attemptSignIn(t.db.prisma, { email: "admin@example.com", password: PASSWORD, address: null, nowMs: T0 + 100, gate })).toMatchObject({ ok: false, reason: "blocked" });
  }, 120_000);
});
