import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { expectSameAnswers } from "@/test/support/engine-equivalence";
import { countingStore, countingTool, useEngineFixture } from "@/test/support/engine-fixture";
import { DuplicateRate } from "./duplicate-rate";
import { Engine } from "./engine";
import type { ToolPolicy } from "./tool";

const charge: ToolPolicy = { name: "payments.charge", kind: "write", ttlMs: 60_000, leaseMs: 5_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };

describe("DuplicateRate", () => {
  it("says a tool's calls are mostly duplicates once most recent ones were, and stops saying it after new keys", () => {
    const rate = new DuplicateRate();
    expect(rate.mostlyDuplicates("t")).toBe(false);
    let replays = 0;
    while (!rate.mostlyDuplicates("t")) {
      rate.observe("t", true);
      replays++;
    }
    // about 16 calls' worth of memory: half of it takes 11 replays in a row
    expect(replays).toBe(11);
    expect(rate.mostlyDuplicates("other")).toBe(false);
    let fresh = 0;
    while (rate.mostlyDuplicates("t")) {
      rate.observe("t", false);
      fresh++;
    }
    expect(fresh).toBeGreaterThan(0);
    expect(fresh).toBeLessThanOrEqual(11);
  });
});

describe("the engine reads a key before reserving it when a tool's calls are mostly duplicates (Redis)", () => {
  const t = useEngineFixture("redis", { startMs: 1_800_000_000_000 });
  const scope = () => `dr${randomUUID().slice(0, 8)}`;

  it("replays with the read alone once duplicates dominate, and reserves at once again once new keys do", async () => {
    const counted = countingStore(t.store);
    const engine = new Engine({ store: counted.store, audit: t.audit, now: t.clock.now });
    const { run, calls } = countingTool();
    const s = scope();
    const first = await engine.invoke(charge, run, { scope: s, key: "k", args: { amount: 1 } });
    expect(first.kind).toBe("executed");
    expect(counted.counter).toEqual({ begins: 1, reads: 0 });

    for (let i = 0; i < 40; i++) {
      const again = await engine.invoke(charge, run, { scope: s, key: "k", args: { amount: 1 } });
      expect(again).toMatchObject({ kind: "replayed", body: (first as { body: string }).body });
    }
    // the first replays went through begin until the rate passed one half; the rest read only
    expect(counted.counter.begins).toBeLessThan(15);
    // each replay either reserved or read, never both: a read of a done key always answers
    expect(counted.counter.begins + counted.counter.reads).toBe(41);
    const readsAfterReplays = counted.counter.reads;
    expect(readsAfterReplays).toBeGreaterThan(25);

    // new keys: each read finds nothing and begin reserves; soon the read is skipped again
    for (let i = 0; i < 40; i++) expect((await engine.invoke(charge, run, { scope: s, key: `new-${i}`, args: { amount: 1 } })).kind).toBe("executed");
    expect(counted.counter.reads - readsAfterReplays).toBeLessThan(15);
    expect(calls).toHaveLength(41);

    // a replay read still audits the duplicate
    await t.audit.flush();
    expect(await t.db.prisma.suppression.count({ where: { scope: s, kind: "replay" } })).toBe(40);
  });

  it("answers every sequence of calls exactly as the engine that always reserves at once does", async () => {
    t.clock.ms = await expectSameAnswers(
      charge,
      (now) => ({
        expected: new Engine({ store: t.store, audit: t.audit, now, replayReads: "never" }),
        actual: new Engine({ store: t.store, audit: t.audit, now, replayReads: "always" }),
      }),
      t.clock.ms,
    );
  });
});
