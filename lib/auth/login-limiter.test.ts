import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres, type TestPostgres } from "@/test/support/databases";
import {
  beginSignInAttempt,
  MAX_FAILURES,
  MAX_FAILURES_PER_ACCOUNT,
  MAX_FAILURES_PER_ADDRESS,
  purgeLoginFailures,
  signInSucceeded,
  WINDOW_MS,
  withdrawSignInAttempt,
  type AttemptDecision,
} from "./login-limiter";

const T0 = Date.UTC(2026, 10, 29, 12);

function allowed(decision: AttemptDecision) {
  if (!decision.allowed) throw new Error(`refused: ${JSON.stringify(decision)}`);
  return decision.attempt;
}

describe.each(["PostgreSQL", "PGlite"] as const)("sign-in limiter on %s", (kind) => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = kind === "PostgreSQL" ? await createTestPostgres("login_limiter") : await createTestPglite();
  });
  afterAll(() => t?.drop());

  it(`without a known address, blocks an account after ${MAX_FAILURES} attempts within the window, until the oldest leaves it`, async () => {
    const { prisma } = t.db;
    for (let i = 0; i < MAX_FAILURES; i++) allowed(await beginSignInAttempt(prisma, "ops@example.com", null, T0 + i * 1_000));
    expect(await beginSignInAttempt(prisma, "ops@example.com", null, T0 + 10_000)).toEqual({ allowed: false, limit: "account", waitMs: WINDOW_MS - 10_000 });
    // the same account however the email is typed, and whatever address it claims; another account is not affected
    expect((await beginSignInAttempt(prisma, "  OPS@example.com ", null, T0 + 11_000)).allowed).toBe(false);
    allowed(await beginSignInAttempt(prisma, "other@example.com", null, T0 + 11_000));
    // refused attempts were withdrawn: they do not push the end of the block
    for (let i = 0; i < 20; i++) expect((await beginSignInAttempt(prisma, "ops@example.com", null, T0 + WINDOW_MS - 1)).allowed).toBe(false);
    // once the first attempt is older than the window, nine are left: allowed again
    allowed(await beginSignInAttempt(prisma, "ops@example.com", null, T0 + WINDOW_MS + 1));
  });

  it("parallel attempts for one account: at most the limit are allowed, and never more in the window all told", async () => {
    const { prisma } = t.db;
    const T1 = T0 + 10 * WINDOW_MS; // a moment no other test uses
    const decisions = await Promise.all(Array.from({ length: 3 * MAX_FAILURES }, () => beginSignInAttempt(prisma, "burst@example.com", null, T1)));
    const admitted = decisions.filter((d) => d.allowed).length;
    // a burst larger than what is left may be refused whole: each attempt counts the others' rows before they are withdrawn
    expect(admitted).toBeLessThanOrEqual(MAX_FAILURES);
    // the refused left nothing behind, so what the burst did not use is still there, and no more
    expect(await prisma.signInFailure.count({ where: { at: new Date(T1) } })).toBe(admitted);
    let more = 0;
    while ((await beginSignInAttempt(prisma, "burst@example.com", null, T1 + 1)).allowed) more++;
    expect(admitted + more).toBe(MAX_FAILURES);
  });

  it("a right password forgets the account's failures; a withdrawn attempt never counted", async () => {
    const { prisma } = t.db;
    for (let i = 0; i < MAX_FAILURES - 1; i++) allowed(await beginSignInAttempt(prisma, "clear@example.com", null, T0 + i));
    const last = allowed(await beginSignInAttempt(prisma, "clear@example.com", null, T0 + 20));
    await signInSucceeded(prisma, last);
    for (let i = 0; i < MAX_FAILURES - 1; i++) allowed(await beginSignInAttempt(prisma, "clear@example.com", null, T0 + 30 + i));
    const busy = allowed(await beginSignInAttempt(prisma, "clear@example.com", null, T0 + 50));
    await withdrawSignInAttempt(prisma, busy);
    // nine failures and a withdrawn attempt: the tenth is still allowed
    allowed(await beginSignInAttempt(prisma, "clear@example.com", null, T0 + 60));
    expect((await beginSignInAttempt(prisma, "clear@example.com", null, T0 + 70)).allowed).toBe(false);
  });

  it("behind a trusted proxy, limits the account per address, each address over all accounts, and the account over all addresses", async () => {
    const { prisma } = t.db;
    const admin = "admin@idemgate.local";
    for (let i = 0; i < MAX_FAILURES; i++) allowed(await beginSignInAttempt(prisma, admin, "203.0.113.7", T0 + i));
    // the attacker's address is blocked for this account, nobody else is
    expect(await beginSignInAttempt(prisma, admin, "203.0.113.7", T0 + 100)).toMatchObject({ allowed: false, limit: "account" });
    const owner = allowed(await beginSignInAttempt(prisma, admin, "198.51.100.1", T0 + 100));
    await signInSucceeded(prisma, owner);
    // a right password elsewhere does not unblock the attacker's address
    expect((await beginSignInAttempt(prisma, admin, "203.0.113.7", T0 + 200)).allowed).toBe(false);

    // one address spraying emails meets the per-address limit (its 10 on the admin count too)
    for (let i = MAX_FAILURES; i < MAX_FAILURES_PER_ADDRESS; i++) allowed(await beginSignInAttempt(prisma, `nobody-${i}@example.com`, "203.0.113.7", T0 + 300 + i));
    expect(await beginSignInAttempt(prisma, "someone-new@example.com", "203.0.113.7", T0 + 400)).toMatchObject({ allowed: false, limit: "address" });

    // guesses at one account spread over many addresses meet the account's ceiling
    const target = "target@example.com";
    for (let i = 0; i < MAX_FAILURES_PER_ACCOUNT; i++) allowed(await beginSignInAttempt(prisma, target, `10.0.${i >> 8}.${i & 255}`, T0 + 500 + i));
    expect(await beginSignInAttempt(prisma, target, "192.0.2.200", T0 + 700)).toMatchObject({ allowed: false, limit: "account" });
  });

  it("purges attempts past the window", async () => {
    const { prisma } = t.db;
    allowed(await beginSignInAttempt(prisma, "old@example.com", null, T0 - WINDOW_MS));
    allowed(await beginSignInAttempt(prisma, "old@example.com", null, T0 + WINDOW_MS));
    const before = await prisma.signInFailure.count();
    expect(await purgeLoginFailures(prisma, T0 + 1)).toBeGreaterThanOrEqual(1);
    expect(await prisma.signInFailure.count()).toBeLessThan(before);
    expect(await prisma.signInFailure.count({ where: { at: { lte: new Date(T0 + 1 - WINDOW_MS) } } })).toBe(0);
  });

  it("keeps no email or address in the table", async () => {
    allowed(await beginSignInAttempt(t.db.prisma, "secret-person@example.com", "192.0.2.55", T0));
    const rows = await t.db.prisma.signInFailure.findMany({ select: { account: true } });
    expect(rows.every((r) => /^[0-9a-f]{64}$/.test(r.account))).toBe(true);
  });
});

describe("sign-in limiter across server processes", () => {
  let pg: TestPostgres;
  let second: Database;
  beforeAll(async () => {
    pg = await createTestPostgres("login_limiter_shared");
    second = await openDatabase({ url: pg.url });
  });
  afterAll(async () => {
    await second?.close();
    await pg?.drop();
  });

  it("counts attempts made through every process on the database, in parallel too", async () => {
    const decisions = await Promise.all(
      Array.from({ length: 3 * MAX_FAILURES }, (_, i) => beginSignInAttempt(i % 2 === 0 ? pg.db.prisma : second.prisma, "shared@example.com", null, T0)),
    );
    const admitted = decisions.filter((d) => d.allowed).length;
    expect(admitted).toBeLessThanOrEqual(MAX_FAILURES);
    let more = 0;
    for (let i = 0; (await beginSignInAttempt(i % 2 === 0 ? second.prisma : pg.db.prisma, "shared@example.com", null, T0 + 1)).allowed; i++) more++;
    expect(admitted + more).toBe(MAX_FAILURES);
    expect((await beginSignInAttempt(pg.db.prisma, "shared@example.com", null, T0 + 2)).allowed).toBe(false);
    expect((await beginSignInAttempt(second.prisma, "shared@example.com", null, T0 + 2)).allowed).toBe(false);
  });
});
