import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { CallAbandonedError } from "@/lib/idempotency/errors";
import { getRegistry, listDemoEffects } from "@/lib/tools";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { reconcile } from "./reconcile";

describe("reconciler", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  let clock = Date.now();
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const tickets = registry.get("tickets.create");

  beforeAll(async () => {
    t = await openTestStore("redis");
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit, now: () => clock });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  const call = (tool: typeof charge, scope: string, key: string | null, args: Record<string, unknown>, session: string | null = "conv-1") =>
    engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args), session });
  const pass = async () => {
    await audit.flush();
    return reconcile({ prisma: t.db.prisma, store: t.store, listEffects: listDemoEffects }, { nowMs: clock, effectGraceMs: 0 });
  };
  const ofScope = (report: Awaited<ReturnType<typeof pass>>, scope: string) => report.flagged.filter((a) => a.scope === scope);
  const chargeArgs = { customerId: "cus_1", amountCents: 1_250, currency: "EUR" };

  it("flags nothing for ordinary retries within one session", async () => {
    const scope = `clean-${randomUUID().slice(0, 6)}`;
    for (let i = 0; i < 5; i++) {
      await call(charge, scope, `order-${i}`, chargeArgs);
      clock += 800;
      await call(charge, scope, `order-${i}`, chargeArgs);
    }
    const report = await pass();
    expect(ofScope(report, scope)).toEqual([]);
  });

  it("flags a crash after the side effect as an unknown outcome once its lease passed, once", async () => {
    const scope = `crash-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "k", { ...chargeArgs, simulate: { outcome: "crash_after_effect" } })).rejects.toBeInstanceOf(CallAbandonedError);
    expect(ofScope(await pass(), scope)).toEqual([]);
    clock += charge.leaseMs + 1;
    const report = await pass();
    const found = ofScope(report, scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_unknown_outcome"]);
    expect(found[0].evidence).toMatchObject({ keyState: "stuck" });
    const again = await pass();
    expect(ofScope(again, scope)).toHaveLength(1);
    expect(await t.db.prisma.anomaly.count({ where: { scope, type: "orphan_unknown_outcome" } })).toBe(1);
  });

  it("fills in an outcome the audit log lost when the key store has the result", async () => {
    const scope = `lost-outcome-${randomUUID().slice(0, 6)}`;
    const out = await call(charge, scope, "k", chargeArgs);
    await audit.flush();
    if (out.kind !== "executed") throw new Error("expected a first execution");
    await t.db.prisma.execution.update({ where: { id: out.executionId }, data: { outcome: null, finishedAt: null } });
    clock += charge.leaseMs + 1;
    const report = await pass();
    expect(ofScope(report, scope)).toEqual([]);
    expect(report.backfilled).toBeGreaterThanOrEqual(1);
    expect((await t.db.prisma.execution.findUnique({ where: { id: out.executionId } }))?.outcome).toBe("succeeded");
  });

  it("flags a succeeded execution whose done record vanished from the key store", async () => {
    const scope = `lost-${randomUUID().slice(0, 6)}`;
    await call(charge, scope, "k", chargeArgs);
    const record = await t.store.get(scope, "k");
    expect(record?.status).toBe("done");
    // what a flush or a restart without persistence does to one record: gone from the store
    await t.store.purge(Number.MAX_SAFE_INTEGER);
    const found = ofScope(await pass(), scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_lost_completion"]);
  });

  it("flags a completion refused for a stale fencing token", async () => {
    const scope = `late-${randomUUID().slice(0, 6)}`;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slowRun = registry.runnerFor(charge, t.db.prisma);
    const held = engine.invoke(charge, async (args, ctx) => {
      await gate;
      return slowRun(args, ctx);
    }, { scope, key: "k", args: registry.parseArgs(charge, chargeArgs) });
    await new Promise((r) => setTimeout(r, 50));
    await engine.release({ scope, key: "k", actor: "test", reason: "presumed dead" });
    await call(charge, scope, "k", chargeArgs);
    release();
    await held;
    const found = ofScope(await pass(), scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_late_completion"]);
    // two charges really happened: that is what the anomaly is for
    expect(await t.db.prisma.demoCharge.count({ where: { scope } })).toBe(2);
  });

  it("flags a side effect with no execution in the audit log", async () => {
    const scope = `unrec-${randomUUID().slice(0, 6)}`;
    await t.db.prisma.demoCharge.create({
      data: { id: `ch_${randomUUID()}`, scope, customerId: "c", amountCents: 1, currency: "EUR", idempotencyKey: "never-audited", createdAt: new Date(clock - 1_000) },
    });
    const found = ofScope(await pass(), scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_unrecorded_effect"]);
  });

  it("flags replays to another session, far-late replays and late fallback matches — not ordinary ones", async () => {
    const scope = `stale-${randomUUID().slice(0, 6)}`;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-a");
    clock += 500;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-a"); // a retry: fine
    clock += 500;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-b"); // another conversation reused the key
    await call(charge, scope, "reused-later", chargeArgs, "conv-c");
    clock += 3 * 3_600_000;
    await call(charge, scope, "reused-later", chargeArgs, "conv-c"); // three hours later
    await call(tickets, scope, null, { title: "printer on fire" }, "conv-d");
    clock += 30_000;
    const replay = await call(tickets, scope, null, { title: "printer on fire" }, "conv-d"); // keyless, 30 s later
    expect(replay.kind).toBe("replayed");

    const found = ofScope(await pass(), scope).filter((a) => a.type === "stale_suppression");
    const reasons = found.map((a) => (a.evidence.reasons as string[]).join(" | "));
    expect(found).toHaveLength(3);
    expect(reasons.some((r) => /session conv-b/.test(r))).toBe(true);
    expect(reasons.some((r) => /3\.0 h after the original/.test(r))).toBe(true);
    expect(reasons.some((r) => /matched only by its arguments/.test(r))).toBe(true);
  });
});
