import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import { authenticateToken, cachedPrincipal, createApiToken, revokeApiToken, TOKEN_CACHE_MS } from "./api-tokens";

async function trailOf(db: Database, tokenId: string) {
  const rows = await db.prisma.operatorAction.findMany({ where: { stateAfter: { path: ["tokenId"], equals: tokenId } }, orderBy: { at: "asc" } });
  return rows.map((r) => ({ actor: r.actor, action: r.action, scope: r.scope, reason: r.reason, after: r.stateAfter }));
}

describe.each(["PostgreSQL", "PGlite"] as const)("API tokens and the operator audit trail, on %s", (kind) => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = kind === "PostgreSQL" ? await createTestPostgres("api_tokens") : await createTestPglite();
  });
  afterAll(() => t?.drop());

  // the console's API names an operator by email, the CLI by `cli:<user>@<host>`: the same operation records both
  for (const actor of ["ops@example.com", "cli:deploy@build-1"]) {
    it(`create and revoke each leave one row naming the actor (${actor})`, async () => {
      const { prisma } = t.db;
      const created = await createApiToken(prisma, { scope: "tenant-a", label: "ci runner", actor });
      expect(await authenticateToken(prisma, created.token)).toMatchObject({ tokenId: created.id, scope: "tenant-a" });
      expect(await revokeApiToken(prisma, { id: created.id, actor, reason: "the runner was retired" })).toBe(true);
      expect(await authenticateToken(prisma, created.token)).toBeNull();
      // revoking again changes nothing and records nothing
      expect(await revokeApiToken(prisma, { id: created.id, actor, reason: "again" })).toBe(false);

      expect(await trailOf(t.db, created.id)).toEqual([
        { actor, action: "token_create", scope: "tenant-a", reason: "ci runner", after: expect.objectContaining({ tokenId: created.id, prefix: created.prefix }) },
        { actor, action: "token_revoke", scope: "tenant-a", reason: "the runner was retired", after: { tokenId: created.id, prefix: created.prefix } },
      ]);
    });
  }

  it("an unknown token id is not revoked and leaves no row", async () => {
    const { prisma } = t.db;
    const before = await prisma.operatorAction.count();
    expect(await revokeApiToken(prisma, { id: "00000000-0000-4000-8000-000000000000", actor: "ops@example.com", reason: "typo" })).toBe(false);
    expect(await prisma.operatorAction.count()).toBe(before);
  });

  it("a token whose audit row cannot be written is not created, and one not revoked stays active", async () => {
    const { prisma } = t.db;
    const kept = await createApiToken(prisma, { scope: "tenant-b", actor: "ops@example.com" });
    const tokens = await prisma.apiToken.count();
    // the audit trail refuses every write (as a full disk or a revoked grant would), the tokens table does not
    await prisma.$executeRawUnsafe(`ALTER TABLE operator_actions ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`);
    try {
      await expect(createApiToken(prisma, { scope: "tenant-b", label: "unrecorded", actor: "ops@example.com" })).rejects.toThrow();
      expect(await prisma.apiToken.count()).toBe(tokens);
      await expect(revokeApiToken(prisma, { id: kept.id, actor: "ops@example.com", reason: "unrecorded" })).rejects.toThrow();
      expect((await prisma.apiToken.findUnique({ where: { id: kept.id } }))?.revokedAt).toBeNull();
    } finally {
      await prisma.$executeRawUnsafe(`ALTER TABLE operator_actions DROP CONSTRAINT refuse_all`);
    }
  });
});

describe("the token cache honours revocation", () => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = await createTestPostgres("token_cache");
  });
  afterAll(() => t?.drop());

  it("a revocation in this process takes effect at once, also for a token looked up a moment before", async () => {
    const { prisma } = t.db;
    const created = await createApiToken(prisma, { scope: "tenant-c", actor: "ops@example.com" });
    const principal = { tokenId: created.id, scope: "tenant-c" };
    expect(await authenticateToken(prisma, created.token)).toMatchObject(principal);
    // now answered without the database
    expect(cachedPrincipal(created.token)).toMatchObject(principal);
    expect(await revokeApiToken(prisma, { id: created.id, actor: "ops@example.com", reason: "leaked" })).toBe(true);
    expect(cachedPrincipal(created.token)).toBeUndefined();
    expect(await authenticateToken(prisma, created.token)).toBeNull();
    expect(cachedPrincipal(created.token)).toBeNull();
  });

  it("a revocation by another process (the CLI, another replica) takes effect within TOKEN_CACHE_MS", async () => {
    const { prisma } = t.db;
    const created = await createApiToken(prisma, { scope: "tenant-c", actor: "ops@example.com" });
    const t0 = Date.now();
    expect(await authenticateToken(prisma, created.token, t0)).toMatchObject({ tokenId: created.id });
    // what `idemgate token revoke` in another process writes; this process's cache does not hear of it
    await prisma.apiToken.update({ where: { id: created.id }, data: { revokedAt: new Date() } });
    expect(await authenticateToken(prisma, created.token, t0 + TOKEN_CACHE_MS - 1)).toMatchObject({ tokenId: created.id });
    expect(cachedPrincipal(created.token, t0 + TOKEN_CACHE_MS)).toBeUndefined();
    expect(await authenticateToken(prisma, created.token, t0 + TOKEN_CACHE_MS)).toBeNull();
  });

  it("an unknown token is answered from the cache as unknown, and a malformed one without a lookup", async () => {
    const { prisma } = t.db;
    const unknown = "idg_" + "x".repeat(43);
    expect(cachedPrincipal(unknown)).toBeUndefined();
    expect(await authenticateToken(prisma, unknown)).toBeNull();
    expect(cachedPrincipal(unknown)).toBeNull();
    expect(cachedPrincipal("not-a-token")).toBeNull();
    expect(cachedPrincipal("idg_" + "y".repeat(300))).toBeNull();
  });
});
