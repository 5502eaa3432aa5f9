import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { expectSameAnswers } from "@/test/support/engine-equivalence";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { DuplicateRate } from "./duplicate-rate";
import { Engine } from "./engine";
import type { RunTool, ToolPolicy } from "./tool";

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

/** The store with its begin and peekReplay calls counted. */
function counting(store: KeyStore) {
  const counter = { begins: 0, reads: 0 };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === "begin") return (...args: Parameters<KeyStore["begin"]>) => (counter.begins++, target.begin(...args));
      if (prop === "peekReplay") return (...args: Parameters<NonNullable<KeyStore["peekReplay"]>>) => (counter.reads++, target.peekReplay!(...args));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store: proxy, counter };
}

describe("the engine reads a key before reserving it when a tool's calls are mostly duplicates (Redis)", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let clock = 1_800_000_000_000;
  const scope = () => `dr${randomUUID().slice(0, 8)}`;
  const tool = () => {
    const calls: unknown[] = [];
    const run: RunTool = async (args) => {
      calls.push(args);
      return { body: { chargeId: `ch_${calls.length}` } };
    };
    return { run, calls };
  };

  beforeAll(async () => {
    t = await openTestStore("redis");
    audit = new PrismaAuditWriter(t.db.prisma, { mode: "durable", flushIntervalMs: 5 });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  it("replays with the read alone once duplicates dominate, and reserves at once again once new keys do", async () => {
    const counted = counting(t.store);
    const engine = new Engine({ store: counted.store, audit, now: () => clock });
    const { run, calls } = tool();
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
    await audit.flush();
    expect(await t.db.prisma.suppression.count({ where: { scope: s, kind: "replay" } })).toBe(40);
  });

  it("answers every sequence of calls exactly as the engine that always reserves at once does", async () => {
    clock = await expectSameAnswers(
      charge,
      (now) => ({
        expected: new Engine({ store: t.store, audit, now, replayReads: "never" }),
        actual: new Engine({ store: t.store, audit, now, replayReads: "always" }),
      }),
      clock,
    );
  });
});
