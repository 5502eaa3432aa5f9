import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { getRegistry } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { reconcile, type AnomalyOf } from "../reconcile";

// What a lost completion's finding says a retry will be told, and what the retry is then told.
function useLostCompletions(kind: "redis" | "pglite") {
  const t = useEngineFixture(kind);
  const clock = t.clock;
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const args = (customerId: string) => registry.parseArgs(charge, { customerId, amountCents: 1_500, currency: "EUR" });
  const call = (scope: string, customerId: string) => t.engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), { scope, key: "k", args: args(customerId) });
  const lostIn = async (scope: string) => {
    await t.audit.flush();
    clock.ms += 1;
    // a new round of the lost-completion scan each time, so every finished call is read again
    const report = await reconcile({ prisma: t.db.prisma, store: t.store, engine: t.engine }, { nowMs: clock.ms, settleMs: 0, lostCompletionRoundMs: 0 });
    return report.flagged.filter((a): a is AnomalyOf<"orphan_lost_completion"> => a.type === "orphan_lost_completion" && a.scope === scope);
  };
  const charges = (scope: string) => t.db.prisma.demoCharge.count({ where: { scope } });
  /** the key store loses the call's record: all its data on Redis, the row on a SQL store */
  const lose = async () => (t.loseData ? t.loseData() : void (await t.store.purge(Number.MAX_SAFE_INTEGER)));
  return { t, charge, call, lostIn, charges, lose };
}

describe("a lost completion's evidence after a Redis loss", () => {
  const { t, call, lostIn, charges, lose } = useLostCompletions("redis");
  const clock = t.clock;

  it("after the store lost its data: a retry gets the result back from the audit log, as the evidence says", async () => {
    const scope = `lc-restored-${randomUUID().slice(0, 6)}`;
    const first = await call(scope, "cus_r");
    await lose();
    clock.ms += 2_000;

    // restored from the log: it needs nobody, so it is stored resolved (the key-store loss incident counts it)
    expect(await lostIn(scope)).toEqual([]);
    const found = await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope, type: "orphan_lost_completion" } });
    expect(found.status).toBe("resolved");
    expect(found.evidence).toMatchObject({ keyState: "absent", retry: "restored_from_audit_log", incident: expect.stringMatching(/^key_store_loss:/) });
    expect(found.summary).toMatch(/a retry gets its result back from the audit log/);
    expect(found.summary).not.toMatch(/run the side effect again/);

    // and that is what happens: the same result, the charge made once
    expect(await call(scope, "cus_r")).toMatchObject({ kind: "replayed", body: first.body });
    expect(await charges(scope)).toBe(1);
  });

});

/**
 * A key-store loss that the audit log restores is one incident (when, how many records, all
 * restored or which not), not one open anomaly per key: per-key anomalies stay open only for keys
 * that need a person.
 */
describe("a Redis key-store loss is one incident", () => {
  const { t, charge, lose } = useLostCompletions("redis");
  const clock = t.clock;
  const registry = getRegistry();
  const callKey = (scope: string, key: string) =>
    t.engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), { scope, key, args: registry.parseArgs(charge, { customerId: `cus_${key}`, amountCents: 700, currency: "EUR" }) });
  const pass = async () => {
    await t.audit.flush();
    clock.ms += 1;
    return reconcile({ prisma: t.db.prisma, store: t.store, engine: t.engine }, { nowMs: clock.ms, settleMs: 0, lostCompletionRoundMs: 0 });
  };

  it("records the log restores are counted in the incident and need nobody; the one it cannot restore stays open and is named", async () => {
    const scope = `loss-${randomUUID().slice(0, 6)}`;
    const keys = ["k1", "k2", "k3", "k4", "k5"];
    const results = new Map<string, string>();
    for (const key of keys) {
      const out = await callKey(scope, key);
      if (out.kind !== "executed") throw new Error("expected a first execution");
      results.set(key, out.body);
      // k5: a row from before results were kept in the log, so nothing can answer for it
      if (key === "k5") {
        await t.audit.flush();
        await t.db.prisma.execution.update({ where: { id: out.executionId }, data: { resultBody: null } });
      }
    }
    await lose();
    clock.ms += 2_000;

    const first = await pass();
    const incidents = await t.db.prisma.anomaly.findMany({ where: { type: "key_store_loss" } });
    expect(incidents).toHaveLength(1);
    expect(first.flagged.filter((a) => a.type === "key_store_loss")).toHaveLength(1);
    expect(incidents[0]).toMatchObject({ status: "open", tool: "key store", scope: null, key: null });
    expect(incidents[0].summary).toBe("The key store lost 5 done records; the audit log restores 4, 1 needs a person (each an open anomaly)");
    const k5 = await t.db.prisma.execution.findFirstOrThrow({ where: { scope, key: "k5" } });
    expect(incidents[0].evidence).toMatchObject({
      records: 5,
      restored: 4,
      notRestored: 1,
      notRestoredKeys: [{ scope, key: "k5", executionId: k5.id, retry: "runs_again" }],
      firstFoundAt: new Date(clock.ms).toISOString(),
    });
    // per key, only the one that needs a person is open
    const open = await t.db.prisma.anomaly.findMany({ where: { scope, status: "open" } });
    expect(open.map((a) => [a.type, a.key])).toEqual([["orphan_lost_completion", "k5"]]);
    expect(await t.db.prisma.anomaly.count({ where: { scope, status: "resolved", type: "orphan_lost_completion" } })).toBe(4);

    // retries get their results back; another pass finds the same incident, not a second one
    for (const key of ["k1", "k2", "k3", "k4"]) expect(await callKey(scope, key)).toMatchObject({ kind: "replayed", body: results.get(key) });
    await pass();
    const after = await t.db.prisma.anomaly.findMany({ where: { type: "key_store_loss" } });
    expect(after).toHaveLength(1);
    expect(after[0].evidence).toMatchObject({ records: 5, restored: 4, notRestored: 1 });
    expect(await t.db.prisma.demoCharge.count({ where: { scope } })).toBe(5);
  });
});

describe.each(["redis", "pglite"] as const)("a lost completion's evidence says what a retry gets (%s key store)", (kind) => {
  const { t, charge, call, lostIn, charges, lose } = useLostCompletions(kind);
  const clock = t.clock;

  it("when a retry finds no record and the log cannot answer for it: the evidence says the side effect runs again, and it does", async () => {
    const scope = `lc-again-${randomUUID().slice(0, 6)}`;
    const first = await call(scope, "cus_a");
    if (first.kind !== "executed") throw new Error("expected a first execution");
    // on Redis the log's copy of the result is what a retry would be answered with: without it
    // (a row from before results were kept) nothing can answer; a SQL store never consults the log
    await t.audit.flush();
    if (kind === "redis") await t.db.prisma.execution.update({ where: { id: first.executionId }, data: { resultBody: null } });
    await lose();
    clock.ms += 2_000;

    const [found] = await lostIn(scope);
    expect(found.evidence).toMatchObject({ keyState: "absent", retry: "runs_again" });
    expect(found.summary).toMatch(/a retry would run the side effect again/);

    expect(await call(scope, "cus_a")).toMatchObject({ kind: "executed" });
    expect(await charges(scope)).toBe(2);
  });

  it("a record under the key answers a retry: the evidence says so", async () => {
    const scope = `lc-record-${randomUUID().slice(0, 6)}`;
    await call(scope, "cus_h");
    // the record now is another execution's (a result an operator resolved is not this call's)
    const held = await t.store.get(scope, "k");
    await t.store.purge(Number.MAX_SAFE_INTEGER);
    const begun = await t.store.begin({
      scope, key: "k", tool: charge.name, fingerprint: held!.fingerprint, leaseMs: 60_000, nowMs: clock.ms, fallback: false,
      session: null, executionId: randomUUID(), takeoverStuck: false, retryUnknown: false,
    });
    expect(begun.kind).toBe("reserved");

    const [found] = await lostIn(scope);
    expect(found.evidence).toMatchObject({ keyState: "inflight", retry: "answered_by_record" });
    expect(found.summary).toMatch(/a retry is answered from the key's current record \(inflight, another execution's\), not run again/);
    await expect(call(scope, "cus_h")).rejects.toMatchObject({ code: "conflict" });
    expect(await charges(scope)).toBe(1);
  });
});
