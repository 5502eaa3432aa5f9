import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { CallAbandonedError, OutcomeUnknownError, UnknownOutcomeKeyError } from "@/lib/idempotency/errors";
import { defineTool, demoTools, getRegistry, ToolRegistry, type ToolDefinition } from "@/lib/tools";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { reconcileDeps } from "./background";
import { reconcile, RECONCILER_ACTOR, type AnomalyOf, type ReconcileOptions } from "./reconcile";
import { SCANS } from "./scan-cursor";

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
    // a pass comes after the rows it reads (rows as young as the pass are read again next time)
    clock += 1;
    return reconcile({ prisma: t.db.prisma, store: t.store, listEffects: (db, since) => registry.listEffects(db, since) }, { nowMs: clock, effectGraceMs: 0, settleMs: 0 });
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
    // the next pass continues after what this one examined: the execution is not read, nor flagged, again
    const again = await pass();
    expect(ofScope(again, scope)).toEqual([]);
    expect(await t.db.prisma.anomaly.count({ where: { scope, type: "orphan_unknown_outcome" } })).toBe(1);
  });

  it("flags an unknown outcome at once, with the call's note, not only after its lease", async () => {
    const scope = `unknown-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "k", { ...chargeArgs, simulate: { outcome: "throw_after_effect" } })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const found = ofScope(await pass(), scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_unknown_outcome"]);
    const [anomaly] = found as AnomalyOf<"orphan_unknown_outcome">[];
    expect(anomaly.evidence).toMatchObject({ cause: "reported", keyState: "unknown", note: expect.stringMatching(/simulated exception after the side effect/) });
    expect(anomaly.evidence.keyHeldBy).toBe(anomaly.evidence.executionId);
    expect(anomaly.summary).toMatch(/ended without knowing whether its side effect happened/);
    expect(ofScope(await pass(), scope)).toEqual([]);
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
    await engine.release({ scope, key: "k", actor: "test", reason: "presumed dead", force: true });
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
    clock += 1_000;
    await t.db.prisma.demoCharge.create({
      data: { id: `ch_${randomUUID()}`, scope, customerId: "c", amountCents: 1, currency: "EUR", idempotencyKey: "never-audited", createdAt: new Date(clock - 500) },
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

    const found = ofScope(await pass(), scope).filter((a): a is AnomalyOf<"stale_suppression"> => a.type === "stale_suppression");
    const reasons = found.map((a) => a.evidence.reasons.join(" | "));
    expect(found).toHaveLength(3);
    expect(reasons.some((r) => /session conv-b/.test(r))).toBe(true);
    expect(reasons.some((r) => /3\.0 h after the original/.test(r))).toBe(true);
    expect(reasons.some((r) => /matched only by its arguments/.test(r))).toBe(true);
  });
});

// A ledger whose records cannot say whether a posting went through.
const cannotTell = defineTool({
  name: "ledger.post",
  kind: "write",
  description: "post to a ledger (test)",
  schema: z.strictObject({ amount: z.number().int() }),
  async run() {
    throw new Error("ledger connection reset after sending");
  },
  probe: async () => ({ outcome: "unknown", note: "the ledger is offline" }),
});

describe("the reconciler asks the tools that can tell", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  let clock = Date.now();
  const registry = new ToolRegistry([...demoTools, cannotTell]);
  const charge = registry.get("payments.charge");
  const chargeArgs = (customerId: string, outcome?: string) => ({ customerId, amountCents: 2_000, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) });

  beforeAll(async () => {
    t = await openTestStore("redis");
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit, now: () => clock });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  const call = (tool: ToolDefinition, scope: string, key: string, args: Record<string, unknown>) =>
    engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args) });
  const pass = async (options: ReconcileOptions = {}) => {
    await audit.flush();
    clock += 1;
    return reconcile(reconcileDeps({ db: t.db, store: t.store, engine, registry }), { nowMs: clock, settleMs: 0, effectGraceMs: 0, ...options });
  };
  const probedIn = (report: Awaited<ReturnType<typeof pass>>, scope: string) => report.probed.filter((p) => p.scope === scope);
  const charges = (scope: string) => t.db.prisma.demoCharge.count({ where: { scope } });

  it("resolves an unknown key with the tool's result and closes its anomaly; the retry replays it", async () => {
    const scope = `p-applied-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "k", chargeArgs("cus_1", "throw_after_effect"))).rejects.toBeInstanceOf(OutcomeUnknownError);
    const report = await pass();
    // on record first, then settled by the tool's answer
    expect(report.flagged.filter((a) => a.scope === scope).map((a) => a.type)).toEqual(["orphan_unknown_outcome"]);
    expect(probedIn(report, scope)).toEqual([{ scope, key: "k", tool: "payments.charge", state: "unknown", answer: "applied", action: "resolved" }]);
    expect((await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope } })).status).toBe("resolved");

    const actions = await t.db.prisma.operatorAction.findMany({ where: { scope }, orderBy: { at: "asc" } });
    expect(actions.map((a) => [a.actor, a.action])).toEqual([
      [RECONCILER_ACTOR, "resolve"],
      [RECONCILER_ACTOR, "resolve_anomaly"],
    ]);
    expect(actions[0].stateAfter).toMatchObject({ state: "done", probe: { outcome: "applied", status: 200 } });
    expect(actions[1].reason).toMatch(/^key resolved by reconciler: payments\.charge answered its status probe: applied/);

    const retry = await call(charge, scope, "k", chargeArgs("cus_1", "throw_after_effect"));
    expect(retry.kind).toBe("replayed");
    const [row] = await t.db.prisma.demoCharge.findMany({ where: { scope } });
    expect(JSON.parse(retry.body).chargeId).toBe(row.id);
    expect(await charges(scope)).toBe(1);
  });

  it("releases a key its tool says did not happen; the retry runs once", async () => {
    const scope = `p-released-${randomUUID().slice(0, 6)}`;
    const failing = engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope, key: "k", args: registry.parseArgs(charge, chargeArgs("cus_2")) });
    await expect(failing).rejects.toBeInstanceOf(OutcomeUnknownError);
    const report = await pass();
    expect(probedIn(report, scope)).toMatchObject([{ answer: "not_applied", action: "released" }]);
    expect(await t.store.get(scope, "k")).toBeNull();
    expect((await call(charge, scope, "k", chargeArgs("cus_2"))).kind).toBe("executed");
    expect(await charges(scope)).toBe(1);
  });

  it("leaves a key whose tool cannot tell, open for an operator, and does not ask again for a while", async () => {
    const scope = `p-unknown-${randomUUID().slice(0, 6)}`;
    await expect(call(cannotTell, scope, "k", { amount: 3 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const first = await pass();
    expect(probedIn(first, scope)).toMatchObject([{ answer: "unknown", action: "none" }]);
    expect((await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope } })).status).toBe("open");
    await expect(call(cannotTell, scope, "k", { amount: 3 })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(probedIn(await pass(), scope)).toEqual([]);
    expect(probedIn(await pass({ reprobeAfterMs: 0 }), scope)).toMatchObject([{ answer: "unknown" }]);
    expect(await t.db.prisma.operatorAction.count({ where: { scope, actor: RECONCILER_ACTOR, action: "probe" } })).toBe(2);
  });

  it("asks about a stuck key only once it has been stuck a while: its holder may only be slow", async () => {
    const scope = `p-stuck-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "k", chargeArgs("cus_3", "crash_after_effect"))).rejects.toBeInstanceOf(CallAbandonedError);
    clock += charge.leaseMs + 1;
    const early = await pass();
    expect(early.flagged.filter((a) => a.scope === scope).map((a) => a.type)).toEqual(["orphan_unknown_outcome"]);
    expect(probedIn(early, scope)).toEqual([]);
    clock += 60_000;
    expect(probedIn(await pass(), scope)).toMatchObject([{ state: "stuck", answer: "applied", action: "resolved" }]);
    expect((await t.store.get(scope, "k"))?.status).toBe("done");
    expect((await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope } })).status).toBe("resolved");
  });

  it("asks about a bounded number of keys per pass", async () => {
    const scope = `p-bounded-${randomUUID().slice(0, 6)}`;
    for (const key of ["a", "b", "c"]) {
      await expect(call(charge, scope, key, chargeArgs(`cus_${key}`, "throw_after_effect"))).rejects.toBeInstanceOf(OutcomeUnknownError);
    }
    expect(probedIn(await pass({ maxProbes: 2 }), scope)).toHaveLength(2);
    expect(probedIn(await pass({ maxProbes: 2 }), scope)).toHaveLength(1);
    expect(probedIn(await pass({ maxProbes: 2 }), scope)).toHaveLength(0);
    expect(await charges(scope)).toBe(3);
  });
});

describe("the reconciler's scans continue where the previous pass left them", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  // the demo tools stamp their effects with the wall clock: this clock follows it
  let offsetMs = 0;
  const now = () => Date.now() + offsetMs;
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const deps = () => ({ prisma: t.db.prisma, store: t.store, listEffects: registry.listEffects.bind(registry) });

  beforeAll(async () => {
    t = await openTestStore("redis");
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit, now });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  const call = (key: string, session: string, outcome?: string) =>
    engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), {
      scope: "cursor",
      key,
      session,
      args: registry.parseArgs(charge, { customerId: `cus_${key}`, amountCents: 100, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) }),
    });
  const pass = async (options: ReconcileOptions = {}) => {
    await audit.flush();
    // every row is at least a few milliseconds older than the pass
    await new Promise((r) => setTimeout(r, 5));
    return reconcile(deps(), { nowMs: now(), settleMs: 0, effectGraceMs: 0, ...options });
  };
  const staleIds = async () => (await t.db.prisma.anomaly.findMany({ where: { type: "stale_suppression" }, select: { dedupeKey: true } })).map((a) => a.dedupeKey).sort();

  it("a second pass does not read again what the first examined; a third reads only what is new", async () => {
    for (const key of ["a", "b", "c"]) await call(key, "run-1");
    await call("a", "run-2"); // a replay to another session: stale
    await expect(call("d", "run-1", "throw_after_effect")).rejects.toBeInstanceOf(OutcomeUnknownError);

    const first = await pass();
    // 3 finished (lost-completion scan) + 1 unknown; 1 replay; 4 charges
    expect(first.examined).toEqual({ executions: 4, suppressions: 1, effects: 4, keys: 0 });
    expect(first.flagged.map((a) => a.type).sort()).toEqual(["orphan_unknown_outcome", "stale_suppression"]);

    const second = await pass();
    expect(second.examined).toEqual({ executions: 0, suppressions: 0, effects: 0, keys: 0 });
    expect(second.flagged).toEqual([]);

    await call("e", "run-1");
    await call("e", "run-1");
    const third = await pass();
    expect(third.examined).toEqual({ executions: 1, suppressions: 1, effects: 1, keys: 0 });
    const stored = await t.db.prisma.reconcilerCursor.findMany({ orderBy: { name: "asc" } });
    expect(stored.map((c) => c.name)).toEqual([...SCANS].sort());
    expect(stored.every((c) => c.caughtUp)).toBe(true);
  });

  it("walks a busy log in order, a batch per pass, each row once", async () => {
    const before = await staleIds();
    for (const key of ["f", "g", "h", "i", "j"]) {
      await call(key, "run-1");
      await call(key, "run-2");
    }
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push((await pass({ batch: 2 })).examined.suppressions);
    expect(seen).toEqual([2, 2, 1, 0]);
    const after = await staleIds();
    expect(after.length - before.length).toBe(5);
    // each anomaly once
    expect(new Set(after).size).toBe(after.length);
  });

  it("re-examines finished calls in rounds: a record the key store loses later is still found", async () => {
    await call("k", "run-1");
    const examined = await pass();
    expect(examined.flagged).toEqual([]);
    await t.loseData!();
    // within the round: only new rows are read
    const within = await pass();
    expect(within.examined.executions).toBe(0);
    expect(within.flagged).toEqual([]);
    offsetMs += 15 * 60_000 + 1;
    const nextRound = await pass();
    const lost = nextRound.flagged.filter((a) => a.type === "orphan_lost_completion").map((a) => a.key);
    expect(lost).toContain("k");
    expect(nextRound.examined.executions).toBeGreaterThan(1);
  });
});
