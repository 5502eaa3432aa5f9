import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BeginInput, KeyStore } from "./key-store";
import type { StoredResult } from "@/lib/idempotency/record";

/**
 * A BeginInput maker for store tests: the defaults below, then the test's own (read on every call,
 * so a scope that changes per test is picked up), then the call's overrides.
 */
export function beginInputs(defaults: () => Partial<BeginInput> & Pick<BeginInput, "scope" | "nowMs">) {
  return (over: Partial<BeginInput> = {}): BeginInput => ({
    key: "k1",
    tool: "payments.charge",
    fingerprint: "fp-a",
    leaseMs: 60_000,
    fallback: false,
    session: null,
    executionId: randomUUID(),
    takeoverStuck: false,
    ...defaults(),
    ...over,
  });
}

/**
 * The behaviour every KeyStore implementation must have. Each store's test file calls this with a
 * factory that opens the store on a real server (or the embedded database) and cleans up after.
 */
export function describeKeyStoreContract(
  name: string,
  makeStore: () => Promise<{ store: KeyStore; cleanup: () => Promise<void> }>,
): void {
  describe(`KeyStore contract: ${name}`, () => {
    let store: KeyStore;
    let cleanup: () => Promise<void>;
    // Every test works in a scope of its own, so tests never see each other's keys.
    let scope: string;
    const T0 = 1_800_000_000_000;
    const ok: StoredResult = { status: 200, body: '{"chargeId":"ch_1","amountCents":500}', final: false };

    beforeAll(async () => {
      ({ store, cleanup } = await makeStore());
    });
    afterAll(async () => {
      await cleanup?.();
    });

    const newScope = () => (scope = `t${randomUUID().slice(0, 8)}`);
    const input = beginInputs(() => ({ scope, nowMs: T0, leaseMs: 1_000, session: "s1" }));

    it("reserves an absent key with a fencing token", async () => {
      newScope();
      const out = await store.begin(input());
      expect(out.kind).toBe("reserved");
      if (out.kind !== "reserved") return;
      expect(out.token).toBeGreaterThan(0);
      expect(out.record).toMatchObject({ status: "inflight", leaseUntilMs: T0 + 1_000, tool: "payments.charge", session: "s1" });
      const got = await store.get(scope, "k1");
      expect(got?.token).toBe(out.token);
    });

    it("answers conflict while inflight, stuck after the lease, replay once done", async () => {
      newScope();
      const first = await store.begin(input());
      expect((await store.begin(input({ nowMs: T0 + 999 }))).kind).toBe("conflict");
      expect((await store.begin(input({ nowMs: T0 + 1_000 }))).kind).toBe("stuck");
      if (first.kind !== "reserved") throw new Error("not reserved");
      const done = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 500);
      expect(done.ok).toBe(true);
      const replay = await store.begin(input({ nowMs: T0 + 2_000 }));
      expect(replay.kind).toBe("replay");
      if (replay.kind === "replay") {
        expect(replay.record.result).toEqual(ok);
        expect(replay.record.expiresAtMs).toBe(T0 + 500 + 60_000);
      }
    });

    it("reports a mismatch when the key comes back with other arguments", async () => {
      newScope();
      const first = await store.begin(input());
      expect((await store.begin(input({ fingerprint: "fp-b" }))).kind).toBe("mismatch");
      if (first.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", first.token, ok, 60_000, T0);
      expect((await store.begin(input({ fingerprint: "fp-b", nowMs: T0 + 10 }))).kind).toBe("mismatch");
    });

    it("runs an expired key as new, with a larger token", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", first.token, ok, 1_000, T0);
      expect((await store.begin(input({ nowMs: T0 + 999 }))).kind).toBe("replay");
      const again = await store.begin(input({ nowMs: T0 + 1_000, fingerprint: "fp-other" }));
      expect(again.kind).toBe("reserved");
      if (again.kind === "reserved") expect(again.token).toBeGreaterThan(first.token);
    });

    it("refuses a completion with a stale fencing token", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const released = await store.release(scope, "k1");
      expect(released.ok).toBe(true);
      const second = await store.begin(input({ nowMs: T0 + 10 }));
      if (second.kind !== "reserved") throw new Error("not reserved");
      expect(second.token).toBeGreaterThan(first.token);
      const stale = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 20);
      expect(stale).toMatchObject({ ok: false, reason: "stale_token" });
      const fresh = await store.complete(scope, "k1", second.token, ok, 60_000, T0 + 20);
      expect(fresh.ok).toBe(true);
      const gone = await store.complete(scope, "nope", first.token, ok, 60_000, T0 + 20);
      expect(gone).toMatchObject({ ok: false, reason: "absent" });
    });

    it("lets a late holder complete its own stuck key when nobody took over", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const late = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 5_000);
      expect(late.ok).toBe(true);
    });

    it("takes over a stuck key when the tool's policy says so", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const inflight = await store.begin(input({ nowMs: T0 + 10, takeoverStuck: true }));
      expect(inflight.kind).toBe("conflict");
      const taken = await store.begin(input({ nowMs: T0 + 1_500, takeoverStuck: true }));
      expect(taken.kind).toBe("reserved");
      if (taken.kind !== "reserved") return;
      expect(taken.takenOver?.token).toBe(first.token);
      expect(taken.token).toBeGreaterThan(first.token);
      expect((await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 1_600)).ok).toBe(false);
    });

    it("gives a reservation back on abandon only to its holder", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      expect(await store.abandon(scope, "k1", first.token + 1)).toBe(false);
      expect(await store.abandon(scope, "k1", first.token)).toBe(true);
      expect(await store.get(scope, "k1")).toBeNull();
      expect((await store.begin(input({ nowMs: T0 + 1 }))).kind).toBe("reserved");
    });

    it("releases and resolves only inflight or stuck keys", async () => {
      newScope();
      const a = await store.begin(input({ key: "a" }));
      await store.begin(input({ key: "b" }));
      if (a.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "a", a.token, ok, 60_000, T0);
      expect(await store.release(scope, "a")).toMatchObject({ ok: false, reason: "not_inflight" });
      expect(await store.resolve(scope, "a", ok, 60_000, T0)).toMatchObject({ ok: false, reason: "not_inflight" });
      expect(await store.release(scope, "zz")).toMatchObject({ ok: false, reason: "absent" });

      const manual: StoredResult = { status: 200, body: '{"resolved":true}', final: false };
      const resolved = await store.resolve(scope, "b", manual, 60_000, T0 + 5_000);
      expect(resolved.ok).toBe(true);
      if (resolved.ok) {
        expect(resolved.before.status).toBe("inflight");
        expect(resolved.after).toMatchObject({ status: "done", expiresAtMs: T0 + 65_000 });
      }
      const replay = await store.begin(input({ key: "b", nowMs: T0 + 6_000 }));
      expect(replay.kind).toBe("replay");
      if (replay.kind === "replay") expect(replay.record.result).toEqual(manual);
    });

    it("stores a final error and replays it byte for byte", async () => {
      newScope();
      const declined: StoredResult = { status: 402, body: '{"type":"card_declined","detail":"ünïcode ✓"}', final: true };
      const r = await store.begin(input());
      if (r.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", r.token, declined, 60_000, T0);
      const replay = await store.begin(input({ nowMs: T0 + 1 }));
      expect(replay.kind === "replay" && replay.record.result).toEqual(declined);
    });

    it("counts keys by state, overall and per tool", async () => {
      newScope();
      // two inflight, one stuck, two done, one expired at T0 + 5_000
      await store.begin(input({ key: "i1", leaseMs: 60_000 }));
      await store.begin(input({ key: "i2", leaseMs: 60_000, tool: "email.send" }));
      await store.begin(input({ key: "s1", leaseMs: 1_000 }));
      for (const [key, ttl] of [["d1", 60_000], ["d2", 60_000], ["e1", 1_000]] as const) {
        const r = await store.begin(input({ key }));
        if (r.kind !== "reserved") throw new Error("not reserved");
        await store.complete(scope, key, r.token, ok, ttl, T0);
      }
      const now = T0 + 5_000;
      const page = await store.list({ scope, limit: 50, nowMs: now });
      expect(page.items).toHaveLength(6);
      const counts = await store.counts(now, { tool: "email.send" });
      expect(counts.inflight).toBeGreaterThanOrEqual(1);
      const byState = async (state: "inflight" | "stuck" | "done" | "expired") =>
        (await store.list({ scope, state, limit: 50, nowMs: now })).items.map((r) => r.key).sort();
      expect(await byState("inflight")).toEqual(["i1", "i2"]);
      expect(await byState("stuck")).toEqual(["s1"]);
      expect(await byState("done")).toEqual(["d1", "d2"]);
      expect(await byState("expired")).toEqual(["e1"]);
      expect((await store.list({ scope, state: "inflight", tool: "email.send", limit: 50, nowMs: now })).items.map((r) => r.key)).toEqual(["i2"]);
      expect(page.items.every((r) => r.result === null)).toBe(true);
    });

    it("counts match the lists across scopes", async () => {
      newScope();
      const now = T0 + 5_000;
      const before = await store.counts(now);
      await store.begin(input({ key: "c1", leaseMs: 60_000 }));
      await store.begin(input({ key: "c2", leaseMs: 10 }));
      const after = await store.counts(now);
      expect(after.inflight - before.inflight).toBe(1);
      expect(after.stuck - before.stuck).toBe(1);
    });

    it("pages newest first with a cursor, exactly once each, even when times tie", async () => {
      newScope();
      const keys = Array.from({ length: 57 }, (_, i) => `page-${String(i).padStart(3, "0")}`);
      // every record created in the same millisecond: the cursor must still be exact
      await Promise.all(keys.map((key) => store.begin(input({ key, leaseMs: 60_000 }))));
      await store.begin(input({ key: "newest", nowMs: T0 + 1, leaseMs: 60_000 }));
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await store.list({ scope, limit: 10, cursor, nowMs: T0 + 2 });
        seen.push(...page.items.map((r) => r.key));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 20);
      expect(seen[0]).toBe("newest");
      expect(seen).toHaveLength(58);
      expect(new Set(seen).size).toBe(58);

      const inflight: string[] = [];
      cursor = null;
      do {
        const page = await store.list({ scope, state: "inflight", limit: 7, cursor, nowMs: T0 + 2 });
        inflight.push(...page.items.map((r) => r.key));
        cursor = page.nextCursor;
      } while (cursor);
      expect(new Set(inflight).size).toBe(58);
    });

    it("finds keys by prefix, including characters that are special in patterns", async () => {
      newScope();
      for (const key of ["order:1", "order:2", "order_%x", "orderly", "other"]) {
        await store.begin(input({ key, leaseMs: 60_000 }));
      }
      const find = async (prefix: string) =>
        (await store.list({ scope, prefix, limit: 50, nowMs: T0 })).items.map((r) => r.key).sort();
      expect(await find("order:")).toEqual(["order:1", "order:2"]);
      expect(await find("order_%")).toEqual(["order_%x"]);
      expect(await find("order")).toEqual(["order:1", "order:2", "order_%x", "orderly"]);
      expect(await find("zzz")).toEqual([]);
    });

    it("never shows one scope's key to another", async () => {
      const a = newScope();
      await store.begin(input({ key: "shared" }));
      const b = newScope();
      expect(await store.get(b, "shared")).toBeNull();
      const out = await store.begin(input({ key: "shared", fingerprint: "fp-z" }));
      expect(out.kind).toBe("reserved");
      expect((await store.list({ scope: a, limit: 10, nowMs: T0 })).items.map((r) => r.scope)).toEqual([a]);
    });

    it("purges records expired before the retention window, index entries included", async () => {
      newScope();
      for (const [key, ttl] of [["old", 1_000], ["recent", 100_000]] as const) {
        const r = await store.begin(input({ key }));
        if (r.kind !== "reserved") throw new Error("not reserved");
        await store.complete(scope, key, r.token, ok, ttl, T0);
      }
      const purged = await store.purge(T0 + 50_000, 100);
      expect(purged).toBeGreaterThanOrEqual(1);
      expect(await store.get(scope, "old")).toBeNull();
      expect(await store.get(scope, "recent")).not.toBeNull();
      const listed = await store.list({ scope, limit: 10, nowMs: T0 + 60_000 });
      expect(listed.items.map((r) => r.key)).toEqual(["recent"]);
      expect((await store.list({ scope, prefix: "old", limit: 10, nowMs: T0 })).items).toEqual([]);
    });

    it("reserves exactly once among 200 concurrent callers of one key", async () => {
      newScope();
      const outs = await Promise.all(
        Array.from({ length: 200 }, () => store.begin(input({ key: "race", leaseMs: 60_000 }))),
      );
      expect(outs.filter((o) => o.kind === "reserved")).toHaveLength(1);
      expect(outs.filter((o) => o.kind === "conflict")).toHaveLength(199);
    });

    it("reserves 200 distinct keys for 200 concurrent callers", async () => {
      newScope();
      const outs = await Promise.all(
        Array.from({ length: 200 }, (_, i) => store.begin(input({ key: `k-${i}`, leaseMs: 60_000 }))),
      );
      expect(outs.every((o) => o.kind === "reserved")).toBe(true);
      const tokens = new Set(outs.map((o) => (o.kind === "reserved" ? o.token : -1)));
      expect(tokens.size).toBe(200);
    });

    it("answers ping", async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
