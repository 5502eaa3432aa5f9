import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ProbeKeyResult } from "@/lib/operator/probe-key";
import { beginInputs } from "@/test/support/key-store-contract";
import { useEngineFixture } from "@/test/support/engine-fixture";
import type { CheckContext } from "./context";
import { ProbeRotation, probeHeldKeys } from "./probe-keys";

// Which held keys a pass asks about, with a tool whose answers change nothing (it cannot tell):
// the same keys stay held from pass to pass, so only the rotation decides who is asked.
describe("the reconciler's probe rotation", () => {
  const t = useEngineFixture("redis");

  it("a tool's stuck keys get their turn however many unknown keys it has", async () => {
    const tool = `ledger.rotation-${randomUUID().slice(0, 6)}`;
    const scope = `rot-${randomUUID().slice(0, 6)}`;
    const startMs = t.clock.ms;
    const input = beginInputs(() => ({ scope, tool, nowMs: startMs, leaseMs: 1_000 }));
    // a crashed holder's key (stuck), then many calls whose outcome is unknown
    const crashed = await t.store.begin(input({ key: "crashed" }));
    if (crashed.kind !== "reserved") throw new Error("not reserved");
    for (let i = 0; i < 12; i++) {
      const begun = await t.store.begin(input({ key: `unknown-${i}`, nowMs: startMs + 10 + i }));
      if (begun.kind !== "reserved") throw new Error("not reserved");
      expect((await t.store.markUnknown(scope, `unknown-${i}`, begun.token, "the service answered 502", startMs + 20 + i)).ok).toBe(true);
    }
    const nowMs = startMs + 120_000; // the crashed key has been stuck for about two minutes

    const asked: string[][] = [];
    const rotation = new ProbeRotation();
    const ctx = { prisma: t.db.prisma, store: t.store, nowMs } as unknown as CheckContext;
    for (let pass = 0; pass < 3; pass++) {
      const keys: string[] = [];
      await probeHeldKeys(
        ctx,
        {
          tools: [tool],
          rotation,
          async ask(target) {
            keys.push(target.key);
            return { answer: { outcome: "unknown" }, action: "none", record: null, actionId: "" } satisfies ProbeKeyResult;
          },
        },
        { maxProbes: 2 },
      );
      asked.push(keys);
    }
    // two keys per pass; the unknown keys alone fill a pass, yet the stuck one is asked in the second
    expect(asked.map((keys) => keys.length)).toEqual([2, 2, 2]);
    expect(asked[0].every((k) => k.startsWith("unknown-"))).toBe(true);
    expect(asked[1]).toContain("crashed");
  });
});
