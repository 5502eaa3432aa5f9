import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CallAbandonedError, OutcomeUnknownError, UnknownOutcomeKeyError } from "@/lib/idempotency/errors";
import { probeKey } from "@/lib/operator/probe-key";
import { releaseKey } from "@/lib/operator/release-key";
import { resolveKey } from "@/lib/operator/resolve-key";
import { reconcileDeps } from "@/lib/process/background";
import { defineTool, demoTools, ToolRegistry, type ToolDefinition } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { reconcile, type ReconcileOptions } from "../reconcile";

// A ledger whose records cannot say whether a posting went through.
let ledgerRuns = 0;
const ledger = defineTool({
  name: "ledger.post",
  kind: "write",
  description: "post to a ledger (test)",
  schema: z.strictObject({ amount: z.number().int() }),
  async run() {
    ledgerRuns++;
    throw new Error("ledger connection reset after sending");
  },
  probe: async () => ({ outcome: "unknown", note: "the ledger is offline" }),
});

/**
 * Calls held only by the audit log after the key store lost their records: a Redis store that
 * lost its data (its keys deleted, as a flush or a restart without persistence leaves it), or a
 * SQL store whose rows are gone (a restored backup: a SQL store does not lose data by itself).
 */
describe.each(["redis", "postgres"] as const)("held calls the key store lost (%s key store)", (kind) => {
  const t = useEngineFixture(kind);
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools, ledger]);
  const charge = registry.get("payments.charge");
  const runtime = () => ({ db: t.db, store: t.store, engine: t.engine, registry });
  const chargeArgs = (customerId: string, outcome?: string) => ({ customerId, amountCents: 3_000, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) });
  const call = (tool: ToolDefinition, scope: string, key: string, args: Record<string, unknown>) =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args) });
  const pass = async (options: ReconcileOptions = {}) => {
    await t.audit.flush();
    clock.ms += 1;
    return reconcile(reconcileDeps(runtime()), { nowMs: clock.ms, settleMs: 0, effectGraceMs: 0, ...options });
  };
  const charges = (scope: string) => t.db.prisma.demoCharge.count({ where: { scope } });
  const lose = async (scope: string) => {
    await t.audit.flush();
    if (t.loseData) await t.loseData();
    else await t.db.prisma.$executeRaw`DELETE FROM idempotency_keys WHERE scope = ${scope}`;
  };
  const counts = async (scope: string) => {
    const c = await t.store.counts(clock.ms, { scope });
    return { unknown: c.unknown, stuck: c.stuck };
  };
  const listed = async (scope: string) => (await t.store.list({ scope, state: "unknown", limit: 50, nowMs: clock.ms })).items.map((r) => r.key).sort();

  /** a call whose outcome is unknown after its charge, one that crashed after its charge (stuck), and a ledger posting nobody can tell about */
  async function heldCalls(scope: string) {
    await expect(call(charge, scope, "unknown-charged", chargeArgs("cus_u", "throw_after_effect"))).rejects.toBeInstanceOf(OutcomeUnknownError);
    await expect(call(charge, scope, "stuck-charged", chargeArgs("cus_s", "crash_after_effect"))).rejects.toBeInstanceOf(CallAbandonedError);
    await expect(call(ledger, scope, "ledger", { amount: 5 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    clock.ms += charge.leaseMs + 1;
    expect(await counts(scope)).toEqual({ unknown: 2, stuck: 1 });
    expect(await charges(scope)).toBe(2);
  }

  it("a reconciler pass holds them again: the lists and counts show what a retry is told, its probes decide them, an operator resolves the rest; nothing runs twice", async () => {
    const scope = `held-${randomUUID().slice(0, 6)}`;
    await heldCalls(scope);
    ledgerRuns = 0;
    await lose(scope);
    expect(await counts(scope)).toEqual({ unknown: 0, stuck: 0 });

    // the pass holds them again (no probes yet): listed and counted as a retry is answered
    const restoring = await pass({ maxProbes: 0 });
    expect(restoring.restored).toBeGreaterThanOrEqual(3);
    expect(await counts(scope)).toEqual({ unknown: 3, stuck: 0 });
    const keys = ["ledger", "stuck-charged", "unknown-charged"];
    expect(await listed(scope)).toEqual(keys);
    for (const key of keys) {
      const record = await t.store.get(scope, key);
      const execution = await t.db.prisma.execution.findFirstOrThrow({ where: { scope, key } });
      expect(record).toMatchObject({ status: "unknown", executionId: execution.id });
    }
    await expect(call(charge, scope, "unknown-charged", chargeArgs("cus_u", "throw_after_effect"))).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    await expect(call(charge, scope, "stuck-charged", chargeArgs("cus_s", "crash_after_effect"))).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    await expect(call(ledger, scope, "ledger", { amount: 5 })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    // a second pass finds nothing more to hold
    expect((await pass({ maxProbes: 0 })).restored).toBe(0);

    // the tools are asked: the charges happened, so both keys are resolved with them
    const probed = (await pass({ stuckProbeAfterMs: 0 })).probed.filter((p) => p.scope === scope);
    expect(probed.filter((p) => p.action === "resolved").map((p) => p.key).sort()).toEqual(["stuck-charged", "unknown-charged"]);
    expect(probed.find((p) => p.key === "ledger")).toMatchObject({ answer: "unknown", action: "none" });
    const replay = await call(charge, scope, "unknown-charged", chargeArgs("cus_u", "throw_after_effect"));
    expect(replay.kind).toBe("replayed");
    const row = await t.db.prisma.demoCharge.findFirstOrThrow({ where: { scope, customerId: "cus_u" } });
    expect(JSON.parse(replay.body).chargeId).toBe(row.id);

    // the ledger's key: an operator checked the ledger and resolves it
    await resolveKey(runtime(), { scope, key: "ledger", actor: "ops@example.com", reason: "posting found in the ledger", result: { posted: true } });
    expect(await call(ledger, scope, "ledger", { amount: 5 })).toMatchObject({ kind: "replayed", body: '{"posted":true}' });
    expect(await counts(scope)).toEqual({ unknown: 0, stuck: 0 });
    // no side effect ran twice
    expect(await charges(scope)).toBe(2);
    expect(ledgerRuns).toBe(0);
  });

  it("a call the store lost that is still within its lease is released only with force: it may still complete", async () => {
    const scope = `held-run-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "running", chargeArgs("cus_r", "crash_after_effect"))).rejects.toBeInstanceOf(CallAbandonedError);
    await lose(scope);
    await expect(releaseKey(runtime(), { scope, key: "running", actor: "ops@example.com", reason: "looks lost" })).rejects.toThrow(/still running/);
    await expect(releaseKey(runtime(), { scope, key: "running", actor: "ops@example.com", reason: "the PSP shows no charge", force: true })).resolves.toBeDefined();
    expect(await charges(scope)).toBe(1);
  });

  it("without a pass: 'Ask the tool', resolve and release on a key the store lost hold it again first, then decide it", async () => {
    const scope = `held-op-${randomUUID().slice(0, 6)}`;
    await heldCalls(scope);
    await expect(call(charge, scope, "not-charged", chargeArgs("cus_n"))).resolves.toMatchObject({ kind: "executed" });
    // a call whose outcome is unknown and that charged nothing
    await expect(
      t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope, key: "nothing", args: registry.parseArgs(charge, chargeArgs("cus_0")) }),
    ).rejects.toBeInstanceOf(OutcomeUnknownError);
    await lose(scope);

    // Ask the tool: it says the charge happened; the key is resolved with it
    const asked = await probeKey(runtime(), { scope, key: "unknown-charged", actor: "ops@example.com", nowMs: clock.ms });
    expect(asked).toMatchObject({ action: "resolved", answer: { outcome: "applied" } });
    expect(await t.store.get(scope, "unknown-charged")).toMatchObject({ status: "done" });
    // an operator resolves the stuck one with what the PSP shows
    const resolved = await resolveKey(runtime(), { scope, key: "stuck-charged", actor: "ops@example.com", reason: "charge seen in the PSP", result: { chargeId: "ch_psp" } });
    expect(resolved).toMatchObject({ status: "done" });
    // and releases the one that charged nothing: the next call runs it, once
    await releaseKey(runtime(), { scope, key: "nothing", actor: "ops@example.com", reason: "no such charge in the PSP" });
    expect((await call(charge, scope, "unknown-charged", chargeArgs("cus_u", "throw_after_effect"))).kind).toBe("replayed");
    expect(await call(charge, scope, "stuck-charged", chargeArgs("cus_s", "crash_after_effect"))).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_psp"}' });
    expect((await call(charge, scope, "nothing", chargeArgs("cus_0"))).kind).toBe("executed");
    // the three charges of before, one run after the release; none twice
    expect(await charges(scope)).toBe(4);
    const actions = await t.db.prisma.operatorAction.findMany({ where: { scope }, orderBy: { at: "asc" } });
    expect(actions.filter((a) => a.action !== "resolve_anomaly").map((a) => [a.action, (a.stateBefore as { state?: string } | null)?.state])).toEqual([
      ["resolve", "unknown"],
      ["resolve", "unknown"],
      ["release", "unknown"],
    ]);
  });
});
