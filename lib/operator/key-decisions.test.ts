import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { reconcile, type ReconcileOptions } from "@/lib/anomalies/reconcile";
import type { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { OutcomeUnknownError, UnknownOutcomeKeyError } from "@/lib/idempotency/errors";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import { reconcileDeps } from "@/lib/process/background";
import { demoTools, ToolRegistry } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { releaseKey } from "./release-key";
import { resolveKey } from "./resolve-key";

/** The audit writer of a process that stops right after the key store carried a decision: the log never hears of it. */
function stopsBeforeTheLog(audit: PrismaAuditWriter): PrismaAuditWriter {
  return Object.assign(Object.create(audit) as PrismaAuditWriter, {
    closeOpenExecution: async () => {
      throw new Error("the process stopped");
    },
  });
}

function setup(kind: "redis" | "postgres" | "pglite") {
  const t = useEngineFixture(kind);
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools]);
  const charge = registry.get("payments.charge");
  const args = (customerId: string) => registry.parseArgs(charge, { customerId, amountCents: 1_200, currency: "EUR", simulate: { outcome: "throw_after_effect" } });
  const callWith = (engine: Engine, scope: string, key: string, customerId: string) => engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), { scope, key, args: args(customerId) });
  const call = (scope: string, key: string, customerId: string) => callWith(t.engine, scope, key, customerId);
  const runtime = (engine: Engine = t.engine) => ({ db: t.db, store: t.store, engine, registry });
  const dying = () => runtime(new Engine({ store: t.store, audit: stopsBeforeTheLog(t.audit), now: clock.now }));
  const pass = async (options: ReconcileOptions = {}) => {
    await t.audit.flush();
    // decisions are stamped with the wall clock: the pass looks after them
    clock.ms = Math.max(clock.ms, Date.now()) + 1;
    return reconcile(reconcileDeps(runtime()), { nowMs: clock.ms, settleMs: 0, effectGraceMs: 0, maxProbes: 0, ...options });
  };
  const lose = async (scope: string) => {
    await t.audit.flush();
    if (t.loseData) await t.loseData();
    else await t.db.prisma.$executeRaw`DELETE FROM idempotency_keys WHERE scope = ${scope}`;
  };
  const charges = (scope: string) => t.db.prisma.demoCharge.count({ where: { scope } });
  const executionOf = (scope: string, key: string) => t.db.prisma.execution.findFirstOrThrow({ where: { scope, key }, orderBy: { startedAt: "desc" } });
  const trail = async (scope: string, key: string) =>
    (await t.db.prisma.operatorAction.findMany({ where: { scope, key }, orderBy: { at: "asc" } })).map((a) => ({ actor: a.actor, action: a.action, reason: a.reason }));

  async function unknownCall(scope: string, key: string, customerId: string) {
    await expect(call(scope, key, customerId)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await pass();
    expect(await t.db.prisma.anomaly.count({ where: { scope, key, type: "orphan_unknown_outcome", status: "open" } })).toBe(1);
  }

  return { t, clock, call, callWith, pass, dying, lose, executionOf, trail, charges, unknownCall, runtime };
}

/**
 * A decision (release, resolve; an operator's or a probe's) whose process stops between the key
 * store and the audit log, on real stores: the reconciler carries it out from the decision written
 * before it, so the log and the trail have it and a key-store loss restores the decision instead of
 * holding the key for a second decision.
 */
describe.each(["redis", "postgres", "pglite"] as const)("decisions whose process stopped half-way (%s key store)", (kind) => {
  const { t, call, pass, dying, executionOf, trail, charges, unknownCall, runtime } = setup(kind);

  it("a resolve the key store carries but the log never heard of is recorded by the reconciler, with its trail, and replayed", async () => {
    const scope = `dec-res-${randomUUID().slice(0, 6)}`;
    await unknownCall(scope, "k1", "cus_1");
    await expect(resolveKey(dying(), { scope, key: "k1", actor: "ops@example.com", reason: "charge seen in the PSP", result: { chargeId: "ch_psp" }, status: 201 })).rejects.toThrow(
      "the process stopped",
    );
    // the store has the decision, the log does not
    expect(await t.store.get(scope, "k1")).toMatchObject({ status: "done" });
    expect((await executionOf(scope, "k1")).outcome).toBe("unknown");
    expect(await trail(scope, "k1")).toEqual([]);

    const report = await pass();
    expect(report.finished).toBe(1);
    const execution = await executionOf(scope, "k1");
    expect(execution).toMatchObject({ outcome: "resolved", resultStatus: 201, resultBody: '{"chargeId":"ch_psp"}' });
    const rows = await trail(scope, "k1");
    expect(rows.filter((r) => r.action === "resolve")).toEqual([{ actor: "ops@example.com", action: "resolve", reason: expect.stringMatching(/^charge seen in the PSP \(carried out by the reconciler/) }]);
    expect(await t.db.prisma.anomaly.count({ where: { scope, key: "k1", status: "open" } })).toBe(0);
    expect(await t.db.prisma.keyDecision.count({ where: { scope } })).toBe(0);
    expect(await call(scope, "k1", "cus_1")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_psp"}' });
    expect(await charges(scope)).toBe(1);
  });

  it("a release the key store carries but the log never heard of is recorded: the key is not held again, the next call runs once", async () => {
    const scope = `dec-rel-${randomUUID().slice(0, 6)}`;
    await unknownCall(scope, "k3", "cus_3");
    await expect(releaseKey(dying(), { scope, key: "k3", actor: "ops@example.com", reason: "no such charge in the PSP" })).rejects.toThrow("the process stopped");
    expect(await t.store.get(scope, "k3")).toBeNull();
    expect((await executionOf(scope, "k3")).outcome).toBe("unknown");

    const report = await pass();
    expect(report.finished).toBe(1);
    expect(report.restored).toBe(0);
    expect(await t.store.get(scope, "k3")).toBeNull();
    expect((await executionOf(scope, "k3")).outcome).toBe("released");
    expect((await trail(scope, "k3")).filter((r) => r.action === "release")).toEqual([
      { actor: "ops@example.com", action: "release", reason: expect.stringMatching(/^no such charge in the PSP \(carried out by the reconciler/) },
    ]);
    expect(await t.db.prisma.anomaly.count({ where: { scope, key: "k3", status: "open" } })).toBe(0);
    // the next call runs (its outcome is unknown again: the tool throws after its charge), once
    await expect(call(scope, "k3", "cus_3")).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(await charges(scope)).toBe(2);
  });

  it("a decision the engine refuses leaves nothing behind to carry out", async () => {
    const scope = `dec-ref-${randomUUID().slice(0, 6)}`;
    await unknownCall(scope, "k4", "cus_4");
    await resolveKey(runtime(), { scope, key: "k4", actor: "ops@example.com", reason: "charge seen", result: { chargeId: "ch_4" } });
    await expect(releaseKey(runtime(), { scope, key: "k4", actor: "ops@example.com", reason: "too late" })).rejects.toThrow(/only stuck, unknown or running keys/);
    expect(await t.db.prisma.keyDecision.count({ where: { scope } })).toBe(0);
    expect((await pass()).finished).toBe(0);
    expect(await t.store.get(scope, "k4")).toMatchObject({ status: "done" });
  });
});

/**
 * After a Redis key-store loss (every key gone, as a flush or a restart without persistence leaves
 * it): a decision the log has is restored as decided, by every process alike, whether the loss
 * came after the reconciler recorded it or before.
 */
describe("decisions whose process stopped half-way, then a Redis key-store loss", () => {
  const { t, clock, call, callWith, pass, dying, lose, trail, charges, unknownCall } = setup("redis");

  it("recorded before the loss: a retry replays the decision's result, the key is not held again for a second decision", async () => {
    const scope = `dec-res-${randomUUID().slice(0, 6)}`;
    await unknownCall(scope, "k1", "cus_1");
    await expect(resolveKey(dying(), { scope, key: "k1", actor: "ops@example.com", reason: "charge seen in the PSP", result: { chargeId: "ch_psp" }, status: 201 })).rejects.toThrow(
      "the process stopped",
    );
    expect((await pass()).finished).toBe(1);
    await lose(scope);
    expect(await call(scope, "k1", "cus_1")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_psp"}' });
    expect((await pass()).restored).toBe(0);
    expect((await trail(scope, "k1")).filter((r) => r.action === "resolve")).toHaveLength(1);
    expect(await charges(scope)).toBe(1);
  });

  it("a loss before the reconciler's pass: the retry is held meanwhile, the pass carries the decision out, and then every process replays it", async () => {
    const scope = `dec-loss-${randomUUID().slice(0, 6)}`;
    // a second process with a replay cache, as the gateway's (IDEMGATE_REPLAY_CACHE_*)
    const cached = new Engine({ store: t.store, audit: t.audit, now: clock.now, replayCache: new ReplayCache() });
    await unknownCall(scope, "k2", "cus_2");
    await expect(resolveKey(dying(), { scope, key: "k2", actor: "ops@example.com", reason: "charge seen in the PSP", result: { chargeId: "ch_2" }, status: 201 })).rejects.toThrow(
      "the process stopped",
    );
    // the caching process answers a retry from the store and keeps the answer
    expect(await callWith(cached, scope, "k2", "cus_2")).toMatchObject({ kind: "replayed", status: 201 });
    await lose(scope);
    // the log still says unknown: held again until the decision written before is carried out
    await expect(call(scope, "k2", "cus_2")).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    // a pass before the decision has settled (its process might still be at it) carries nothing
    // out, and its probes leave the key alone: the decision is not made a second time
    const early = await pass({ settleMs: 3_600_000, maxProbes: 20 });
    expect(early.finished).toBe(0);
    expect(early.probed.filter((p) => p.scope === scope)).toEqual([]);
    await expect(call(scope, "k2", "cus_2")).rejects.toBeInstanceOf(UnknownOutcomeKeyError);

    expect((await pass()).finished).toBe(1);
    expect(await call(scope, "k2", "cus_2")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_2"}' });
    expect(await callWith(cached, scope, "k2", "cus_2")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_2"}' });
    // lost again: both processes still answer alike, from the log
    await lose(scope);
    const fresh = new Engine({ store: t.store, audit: t.audit, now: clock.now });
    expect(await callWith(fresh, scope, "k2", "cus_2")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_2"}' });
    expect(await callWith(cached, scope, "k2", "cus_2")).toMatchObject({ kind: "replayed", status: 201, body: '{"chargeId":"ch_2"}' });
    expect((await trail(scope, "k2")).filter((r) => r.action === "resolve")).toHaveLength(1);
    expect(await charges(scope)).toBe(1);
  });

});
