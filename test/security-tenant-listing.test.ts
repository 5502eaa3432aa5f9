import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { Runtime } from "@/lib/server/runtime";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { installTestRuntime } from "@/test/support/runtime";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";

// The route module imports the console's session code, which marks itself server-only; the API
// token path under test never reads a cookie.
const { GET: listKeysRoute } = await import("@/app/api/v1/keys/route");

/**
 * A tenant's list of keys says nothing about other scopes: the same queries answer the same pages
 * (the same keys, the same number of pages) whether or not another tenant holds many keys matching
 * them. Through shared indexes read within a budget, tenant A got empty pages with a cursor while
 * tenant B held many `order-` keys, and so learnt B's key prefixes.
 */
const OTHER_TENANT_KEYS = 600;

interface Page {
  items: { key: string; scope: string }[];
  nextCursor: string | null;
}

describe.each(["redis", "postgres"] as const)("a tenant's key listing on the %s store", (kind) => {
  let t: StoreUnderTest;
  let runtime: Runtime;
  let tokenA: string;
  let tokenB: string;

  beforeAll(async () => {
    t = await openTestStore(kind);
    runtime = installTestRuntime({ db: t.db, store: t.store, registry: new ToolRegistry(demoTools) });
    tokenA = (await createApiToken(t.db.prisma, { scope: "tenant-a", actor: "test" })).token;
    tokenB = (await createApiToken(t.db.prisma, { scope: "tenant-b", actor: "test" })).token;
  });
  afterAll(async () => {
    await runtime?.close();
    await t?.cleanup();
  });

  async function list(token: string, query: Record<string, string>): Promise<Page> {
    const url = new URL("http://127.0.0.1/api/v1/keys");
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    const res = await listKeysRoute(new Request(url, { headers: { authorization: `Bearer ${token}` } }), { params: Promise.resolve({}) });
    expect(res.status).toBe(200);
    return (await res.json()) as Page;
  }

  /** Every page of a listing: the keys in order and how many pages it took. */
  async function listAll(token: string, query: Record<string, string>) {
    const keys: string[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const page: Page = await list(token, cursor === null ? query : { ...query, cursor });
      pages++;
      keys.push(...page.items.map((item) => item.key));
      // a tenant never gets an empty page it has to page past
      if (page.nextCursor !== null) expect(page.items.length).toBeGreaterThan(0);
      cursor = page.nextCursor;
      expect(pages).toBeLessThan(200);
    } while (cursor !== null);
    return { keys, pages };
  }

  async function seed(scope: string, key: string, nowMs: number) {
    const begun = await t.store.begin({
      scope, key, tool: "payments.charge", fingerprint: "f".repeat(64), leaseMs: 60_000, nowMs,
      fallback: false, session: null, executionId: `exec-${scope}-${key}`, takeoverStuck: false, retryUnknown: false,
    });
    if (begun.kind !== "reserved") throw new Error(`could not seed ${scope}/${key}: ${begun.kind}`);
    await t.store.complete(scope, key, begun.token, { status: 200, body: "{}", final: false }, 86_400_000, nowMs + 1);
  }

  const QUERIES: Record<string, string>[] = [
    { prefix: "order-", limit: "1" },
    { prefix: "order-", limit: "2", state: "done" },
    { state: "done", limit: "1" },
    { limit: "1" },
    { tool: "payments.charge", limit: "1" },
  ];

  it("answers the same pages whether or not another tenant holds many matching keys", async () => {
    const t0 = Date.now() - 60_000;
    // tenant A's own keys, older than all of tenant B's
    await seed("tenant-a", "order-a1", t0);
    await seed("tenant-a", "order-a2", t0 + 1);
    await seed("tenant-a", "invoice-a3", t0 + 2);
    const before = [];
    for (const query of QUERIES) before.push(await listAll(tokenA, query));

    for (let i = 0; i < OTHER_TENANT_KEYS; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => seed("tenant-b", `order-b${i + j}`, t0 + 10 + i + j)));
    }
    // tenant B sees its keys
    expect((await list(tokenB, { prefix: "order-", limit: "5" })).items).toHaveLength(5);

    for (const [i, query] of QUERIES.entries()) {
      const after = await listAll(tokenA, query);
      expect(after, JSON.stringify(query)).toEqual(before[i]);
    }
    expect(before[0].keys).toEqual(["order-a2", "order-a1"]);
    expect(before[0].pages).toBe(2);
    // and the first page of A's listing holds A's newest matching key
    const first = await list(tokenA, { prefix: "order-", limit: "1" });
    expect(first.items.map((item) => [item.scope, item.key])).toEqual([["tenant-a", "order-a2"]]);
  }, 120_000);
});
