import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticateToken, cachedPrincipal, createApiToken, TOKEN_CACHE_ENTRIES, UNKNOWN_TOKEN_CACHE_ENTRIES } from "@/lib/auth/api-tokens";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";

/**
 * The token cache keeps a real token's answer while a caller floods the gateway with made-up
 * tokens: unknown tokens are remembered apart and evict only each other.
 */
describe("the API token cache under a flood of unknown tokens", () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await createTestPostgres("token_cache");
  });
  afterAll(() => pg?.drop());

  it("still answers a known token from memory after more unknown tokens than the cache holds", async () => {
    const { prisma } = pg.db;
    const created = await createApiToken(prisma, { scope: "tenant-a", label: "real", actor: "test" });
    const nowMs = Date.now();
    expect(await authenticateToken(prisma, created.token, nowMs)).toMatchObject({ tokenId: created.id });

    const flood = Math.max(TOKEN_CACHE_ENTRIES, UNKNOWN_TOKEN_CACHE_ENTRIES) + 1;
    const madeUp = Array.from({ length: flood }, () => "idg_" + randomBytes(32).toString("base64url"));
    for (let i = 0; i < madeUp.length; i += 50) {
      await Promise.all(madeUp.slice(i, i + 50).map((token) => authenticateToken(prisma, token, nowMs)));
    }
    // the real token is answered without a lookup; the latest unknown ones are remembered as unknown
    expect(cachedPrincipal(created.token, nowMs)).toMatchObject({ tokenId: created.id, scope: "tenant-a" });
    expect(cachedPrincipal(madeUp[madeUp.length - 1], nowMs)).toBeNull();
    // and the oldest unknown ones were dropped: at most UNKNOWN_TOKEN_CACHE_ENTRIES are kept
    expect(cachedPrincipal(madeUp[0], nowMs)).toBeUndefined();
  });
});
