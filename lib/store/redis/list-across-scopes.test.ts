// Lists across scopes (page-across-1.lua) where a bucket's budget of examined entries runs out
// before a page is full: tool filters, the lex fallback, states with filters; and their counts.
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stateOf, type KeyRecord, type StoredResult } from "@/lib/idempotency/record";
import type { ListQuery } from "@/lib/idempotency/key-store";
import { beginInputs } from "@/test/support/key-store-contract";
import { deleteRedisPrefix } from "@/test/support/stores";
import { memberOf } from "./key-names";
import { RedisKeyStore } from "./redis-key-store";

const REDIS_URL = process.env.REDIS_TEST_URL ?? "redis://127.0.0.1:6379";
const T0 = 1_800_000_000_000;
const ok: StoredResult = { status: 200, body: "{}", final: false };

describe("lists across scopes within a budget of examined entries", () => {
  const prefix = `idgtest:${randomUUID().slice(0, 8)}`;
  let store: RedisKeyStore;
  const all: KeyRecord[] = [];
  const scopes = ["a", "a-", "a0", "b"];
  const input = beginInputs(() => ({ scope: "a", nowMs: T0 }));
  const now = T0 + 1_000;

  beforeAll(async () => {
    store = new RedisKeyStore(new Redis(REDIS_URL, { maxRetriesPerRequest: 1 }), { prefix });
    for (const scope of scopes) {
      await Promise.all(
        Array.from({ length: 500 }, async (_, i) => {
          const key = `k-${i}`;
          const tool = i % 37 === 0 ? "rare.tool" : "common.tool";
          const r = await store.begin(input({ scope, key, tool, nowMs: T0 + (i % 3), leaseMs: i % 11 === 0 ? 1 : 60_000 }));
          if (r.kind !== "reserved") throw new Error(r.kind);
          if (i % 4 === 1) await store.complete(scope, key, r.token, ok, i % 8 === 1 ? 10 : 60_000, T0 + (i % 5));
          if (i % 4 === 2) await store.markUnknown(scope, key, r.token, "x", T0 + (i % 2));
        }),
      );
    }
    for (const scope of scopes) for (let i = 0; i < 500; i++) all.push((await store.get(scope, `k-${i}`))!);
  }, 120_000);

  afterAll(async () => {
    await deleteRedisPrefix(prefix);
    await store?.close();
  });

  const walk = async (query: Omit<ListQuery, "cursor" | "nowMs">) => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await store.list({ ...query, cursor, nowMs: now });
      seen.push(...page.items.map((r) => memberOf(r.scope, r.key)));
      cursor = page.nextCursor;
      if (++pages > 20_000) throw new Error("pagination does not end");
    } while (cursor);
    return seen;
  };
  const deadline = (r: KeyRecord) => ({ inflight: r.leaseUntilMs, unknown: r.unknownAtMs, done: r.expiresAtMs })[r.status]!;
  const ordered = (rows: KeyRecord[], score: (r: KeyRecord) => number) =>
    rows
      .map((r) => ({ m: memberOf(r.scope, r.key), s: score(r) }))
      .sort((a, b) => b.s - a.s || (a.m < b.m ? 1 : a.m > b.m ? -1 : 0))
      .map((e) => e.m);

  it("pages a rare tool exactly when each bucket's budget (20 and 40 entries) runs out before a match", async () => {
    const want = ordered(all.filter((r) => r.tool === "rare.tool"), (r) => r.createdAtMs);
    for (const limit of [1, 2]) expect(await walk({ tool: "rare.tool", limit })).toEqual(want);
  }, 120_000);

  it("pages a key prefix through the lex indexes, and through the created ones where a bucket has more matches than its budget", async () => {
    for (const [p, limit] of [["k-", 1], ["k-1", 1], ["k-2", 3]] as const) {
      expect(await walk({ prefix: p, limit }), p).toEqual(ordered(all.filter((r) => r.key.startsWith(p)), (r) => r.createdAtMs));
    }
  }, 120_000);

  it("pages every state, alone and with a tool or key prefix filter", async () => {
    for (const state of ["inflight", "stuck", "unknown", "done", "expired"] as const) {
      const rows = all.filter((r) => stateOf(r, now) === state);
      expect(await walk({ state, limit: 7 }), state).toEqual(ordered(rows, deadline));
      expect(await walk({ state, tool: "rare.tool", limit: 1 }), state).toEqual(ordered(rows.filter((r) => r.tool === "rare.tool"), deadline));
      expect(await walk({ state, prefix: "k-3", limit: 1 }), state).toEqual(ordered(rows.filter((r) => r.key.startsWith("k-3")), deadline));
    }
  }, 240_000);

  it("counts every state, and by tool", async () => {
    const c = await store.counts(now);
    const t = await store.counts(now, { tool: "rare.tool" });
    for (const state of ["inflight", "stuck", "unknown", "done", "expired"] as const) {
      expect(c[state], state).toBe(all.filter((r) => stateOf(r, now) === state).length);
      expect(t[state], state).toBe(all.filter((r) => stateOf(r, now) === state && r.tool === "rare.tool").length);
    }
  });
});
