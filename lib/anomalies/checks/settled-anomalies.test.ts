import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { OutcomeUnknownError } from "@/lib/idempotency/errors";
import { reconcileDeps } from "@/lib/process/background";
import { demoTools, ToolRegistry } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { reconcile } from "../reconcile";

/**
 * Unknown-outcome anomalies whose key was decided or is done without them being closed (stored by
 * one process's pass just after another process decided the key, or decided through the engine
 * alone): the reconciler closes them, with the reason in the trail. Real stores.
 */
describe.each(["redis", "postgres"] as const)("anomalies whose key needs nobody any more (%s key store)", (kind) => {
  const t = useEngineFixture(kind);
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools]);
  const charge = registry.get("payments.charge");
  const call = (scope: string, key: string, customerId: string) =>
    t.engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), {
      scope,
      key,
      args: registry.parseArgs(charge, { customerId, amountCents: 900, currency: "EUR", simulate: { outcome: "throw_after_effect" } }),
    });
  const pass = async () => {
    await t.audit.flush();
    clock.ms = Math.max(clock.ms, Date.now()) + 1;
    return reconcile(reconcileDeps({ db: t.db, store: t.store, engine: t.engine, registry }), { nowMs: clock.ms, settleMs: 0, effectGraceMs: 0, maxProbes: 0 });
  };
  const anomaly = (scope: string, key: string) => t.db.prisma.anomaly.findFirstOrThrow({ where: { scope, key, type: "orphan_unknown_outcome" } });

  it("an unknown outcome whose key was resolved or released without closing it is closed by the next pass, the reason in the trail; one still held stays open", async () => {
    const scope = `settled-${randomUUID().slice(0, 6)}`;
    for (const key of ["resolved", "released", "held"]) await expect(call(scope, key, `cus_${key}`)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await pass();
    for (const key of ["resolved", "released", "held"]) expect((await anomaly(scope, key)).status).toBe("open");

    // decided through the engine alone, as a decision that missed the anomalies stored after it
    await t.engine.resolve({ scope, key: "resolved", actor: "ops@example.com", reason: "charge seen", result: { chargeId: "ch_1" }, ttlMs: 60_000 });
    await t.engine.release({ scope, key: "released", actor: "ops@example.com", reason: "no charge" });
    const report = await pass();
    expect(report.settled).toBe(2);

    expect((await anomaly(scope, "resolved")).status).toBe("resolved");
    expect((await anomaly(scope, "released")).status).toBe("resolved");
    expect((await anomaly(scope, "held")).status).toBe("open");
    const trail = await t.db.prisma.operatorAction.findMany({ where: { scope, action: "resolve_anomaly" }, orderBy: { key: "asc" } });
    expect(trail.map((a) => ({ key: a.key, actor: a.actor, reason: a.reason }))).toEqual([
      { key: "released", actor: "reconciler", reason: "its call was released (the audit log records the decision)" },
      { key: "resolved", actor: "reconciler", reason: "its call was resolved (the audit log records the decision)" },
    ]);
    // nothing more to close
    expect((await pass()).settled).toBe(0);
  });
});
