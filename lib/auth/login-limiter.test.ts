import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { clearLoginFailures, loginBlockedForMs, MAX_FAILURES, purgeLoginFailures, recordLoginFailure, WINDOW_MS } from "./login-limiter";

const T0 = Date.UTC(2026, 10, 29, 12);

describe.each(["PostgreSQL", "PGlite"] as const)("sign-in limiter on %s", (kind) => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = kind === "PostgreSQL" ? await createTestPostgres("login_limiter") : await createTestPglite();
  });
  afterAll(() => t?.drop());

  it(`blocks an account after ${MAX_FAILURES} failures within the window, until the oldest leaves it`, async () => {
    const { prisma } = t.db;
    for (let i = 0; i < MAX_FAILURES - 1; i++) await recordLoginFailure(prisma, "ops@example.com", T0 + i * 1_000);
    expect(await loginBlockedForMs(prisma, "ops@example.com", T0 + 10_000)).toBe(0);
    await recordLoginFailure(prisma, "ops@example.com", T0 + 10_000);
    expect(await loginBlockedForMs(prisma, "ops@example.com", T0 + 10_000)).toBe(WINDOW_MS - 10_000);
    // the same account however the email is typed; another account is not affected
    expect(await loginBlockedForMs(prisma, "  OPS@example.com ", T0 + 10_000)).toBeGreaterThan(0);
    expect(await loginBlockedForMs(prisma, "other@example.com", T0 + 10_000)).toBe(0);
    // once the first failure is older than the window, nine are left: allowed again
    expect(await loginBlockedForMs(prisma, "ops@example.com", T0 + WINDOW_MS + 1)).toBe(0);
  });

  it("forgets an account's failures after a successful sign-in, and purges failures past the window", async () => {
    const { prisma } = t.db;
    for (let i = 0; i < MAX_FAILURES; i++) await recordLoginFailure(prisma, "clear@example.com", T0 + i);
    expect(await loginBlockedForMs(prisma, "clear@example.com", T0 + MAX_FAILURES)).toBeGreaterThan(0);
    await clearLoginFailures(prisma, "clear@example.com");
    expect(await loginBlockedForMs(prisma, "clear@example.com", T0 + MAX_FAILURES)).toBe(0);

    await recordLoginFailure(prisma, "old@example.com", T0);
    await recordLoginFailure(prisma, "old@example.com", T0 + WINDOW_MS);
    const before = await prisma.signInFailure.count();
    expect(await purgeLoginFailures(prisma, T0 + WINDOW_MS + 1)).toBeGreaterThanOrEqual(1);
    expect(await prisma.signInFailure.count()).toBeLessThan(before);
    expect(await prisma.signInFailure.count({ where: { at: { lte: new Date(T0 + 1) } } })).toBe(0);
  });

  it("keeps no email address in the table", async () => {
    await recordLoginFailure(t.db.prisma, "secret-person@example.com", T0);
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

  it("counts failures made through every process on the database", async () => {
    for (let i = 0; i < MAX_FAILURES; i++) {
      const through = i % 2 === 0 ? pg.db.prisma : second.prisma;
      await recordLoginFailure(through, "shared@example.com", T0 + i);
    }
    expect(await loginBlockedForMs(pg.db.prisma, "shared@example.com", T0 + MAX_FAILURES)).toBeGreaterThan(0);
    expect(await loginBlockedForMs(second.prisma, "shared@example.com", T0 + MAX_FAILURES)).toBeGreaterThan(0);
  });
});
