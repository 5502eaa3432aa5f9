import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { expectSameAnswers } from "@/test/support/engine-equivalence";
import { countingStore, countingTool, useEngineFixture } from "@/test/support/engine-fixture";
import { Engine } from "./engine";
import { MismatchError } from "./errors";
import type { KeyRecord } from "./record";
import { ReplayCache } from "./replay-cache";
import type { ToolPolicy } from "./tool";

const charge: ToolPolicy = { name: "payments.charge", kind: "write", ttlMs: 60_000, leaseMs: 5_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };

function doneRecord(over: Partial<KeyRecord> = {}): KeyRecord {
  return {
    scope: "s", key: "k", tool: "t", fingerprint: "f", status: "done", token: 1, createdAtMs: 0, leaseUntilMs: null,
    completedAtMs: 1, expiresAtMs: 1_000, result: { status: 200, body: "{}", final: false }, fallback: false,
    session: null, executionId: null, outcomeNote: null, unknownAtMs: null, ...over,
  };
}

describe("ReplayCache", () => {
  it("keeps done records with a result until they expire, and nothing else", () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 });
    cache.remember(doneRecord({ key: "inflight", status: "inflight", result: null, expiresAtMs: null, leaseUntilMs: 500 }), 0);
    cache.remember(doneRecord({ key: "expired", expiresAtMs: 100 }), 100);
    cache.remember(doneRecord({ key: "done" }), 0);
    expect(cache.get("s", "inflight", 0)).toBeNull();
    expect(cache.get("s", "expired", 0)).toBeNull();
    expect(cache.get("s", "done", 999)?.key).toBe("done");
    expect(cache.get("t", "done", 999)).toBeNull();
    expect(cache.get("s", "done", 1_000)).toBeNull();
    // an expired entry is dropped on the read that finds it expired
    expect(cache.size).toBe(0);
  });

  it("evicts the least recently used record beyond its entry and byte limits", () => {
    const byCount = new ReplayCache({ maxEntries: 2, maxBytes: 1 << 20 });
    for (const key of ["a", "b", "c"]) byCount.remember(doneRecord({ key }), 0);
    expect(["a", "b", "c"].map((k) => byCount.get("s", k, 0) !== null)).toEqual([false, true, true]);

    const bySize = new ReplayCache({ maxEntries: 100, maxBytes: 4_096 });
    const big = { status: 200, body: "x".repeat(1_000), final: false };
    for (const key of ["a", "b", "c"]) bySize.remember(doneRecord({ key, result: big }), 0);
    expect(bySize.size).toBeLessThan(3);
    expect(bySize.get("s", "c", 0)).not.toBeNull();
  });

  it("refuses a size that keeps nothing", () => {
    expect(() => new ReplayCache({ maxEntries: 0, maxBytes: 1 })).toThrow(/at least one record/);
  });
});

describe.each(["redis", "pglite"] as const)("engine with a replay cache on the %s store", (kind) => {
  const t = useEngineFixture(kind, { startMs: 1_800_000_000_000 });
  const scope = () => `rc${randomUUID().slice(0, 8)}`;

  it("answers duplicates of a done key without the store, audited like any replay", async () => {
    const counted = countingStore(t.store);
    const engine = new Engine({ store: counted.store, audit: t.audit, now: t.clock.now, replayCache: new ReplayCache() });
    const tool = countingTool();
    const s = scope();
    const first = await engine.invoke(charge, tool.run, { scope: s, key: "k1", args: { amount: 5 } });
    expect(first.kind).toBe("executed");
    expect(counted.counter.begins).toBe(1);

    t.clock.ms += 1_500;
    const again = await engine.invoke(charge, tool.run, { scope: s, key: "k1", args: { amount: 5 }, session: "retry" });
    expect(again).toMatchObject({ kind: "replayed", status: 200, body: (first as { body: string }).body, gapMs: 1_500 });
    expect(counted.counter.begins).toBe(1);
    expect(tool.calls).toHaveLength(1);

    // other arguments under the same key: a mismatch, as the store would answer, also without it
    await expect(engine.invoke(charge, tool.run, { scope: s, key: "k1", args: { amount: 6 } })).rejects.toBeInstanceOf(MismatchError);
    expect(counted.counter.begins).toBe(1);

    await t.audit.flush();
    const suppressions = await t.db.prisma.suppression.findMany({ where: { scope: s }, orderBy: { at: "asc" } });
    expect(suppressions.map((x) => [x.kind, x.gapMs, x.session])).toEqual([
      ["replay", 1_500, "retry"],
      ["mismatch", 1_500, null],
    ]);
    // the same scope's key in another scope is another key
    expect((await engine.invoke(charge, tool.run, { scope: scope(), key: "k1", args: { amount: 5 } })).kind).toBe("executed");
  });

  it("goes back to the store once the record expires, and runs the action again", async () => {
    const counted = countingStore(t.store);
    const engine = new Engine({ store: counted.store, audit: t.audit, now: t.clock.now, replayCache: new ReplayCache() });
    const tool = countingTool();
    const s = scope();
    await engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} });
    t.clock.ms += charge.ttlMs - 1;
    expect((await engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).kind).toBe("replayed");
    expect(counted.counter.begins).toBe(1);
    t.clock.ms += 1;
    expect((await engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).kind).toBe("executed");
    expect(counted.counter.begins).toBe(2);
    expect(tool.calls).toHaveLength(2);
  });

  it("learns done keys from the store's replays, so a second process caches what the first completed", async () => {
    const tool = countingTool();
    const s = scope();
    const first = new Engine({ store: t.store, audit: t.audit, now: t.clock.now });
    await first.invoke(charge, tool.run, { scope: s, key: "k", args: {} });
    const counted = countingStore(t.store);
    const second = new Engine({ store: counted.store, audit: t.audit, now: t.clock.now, replayCache: new ReplayCache() });
    for (let i = 0; i < 3; i++) expect((await second.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).kind).toBe("replayed");
    expect(counted.counter.begins).toBe(1);
    expect(tool.calls).toHaveLength(1);
  });

  it("answers every sequence of calls exactly as the engine without a cache does", async () => {
    t.clock.ms = await expectSameAnswers(
      charge,
      (now) => ({
        expected: new Engine({ store: t.store, audit: t.audit, now }),
        actual: new Engine({ store: t.store, audit: t.audit, now, replayCache: new ReplayCache() }),
      }),
      t.clock.ms,
    );
  }, 120_000); // a property over many sequences, on PGlite too: slow on a busy machine
});
