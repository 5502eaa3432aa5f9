import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CallAbandonedError, OutcomeUnknownError, ToolFailedError, UnknownOutcomeKeyError } from "@/lib/idempotency/errors";
import { defineTool, demoTools, getRegistry, ToolRegistry, type ToolDefinition } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { findExecutionsByArguments } from "@/lib/audit/find-executions";
import { reconcileDeps } from "@/lib/process/background";
import { indexMissingArgumentsAtStart, reconcile, RECONCILER_ACTOR, type AnomalyOf, type ReconcileOptions } from "./reconcile";
import { SCANS } from "./scan-cursor";

describe("reconciler", () => {
  const t = useEngineFixture("redis");
  const clock = t.clock;
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const tickets = registry.get("tickets.create");
  // tickets.create as a tool that takes keyless calls as duplicates for ten minutes
  const slowTickets = { ...tickets, name: "tickets.create_slowly", fallbackTtlMs: 10 * 60_000 };

  const call = (tool: typeof charge, scope: string, key: string | null, args: Record<string, unknown>, session: string | null = "conv-1") =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args), session });
  const pass = async () => {
    await t.audit.flush();
    // a pass comes after the rows it reads (rows as young as the pass are read again next time)
    clock.ms += 1;
    return reconcile({ prisma: t.db.prisma, store: t.store, listEffects: (db, since) => registry.listEffects(db, since) }, { nowMs: clock.ms, effectGraceMs: 0, settleMs: 0 });
  };
  const ofScope = (report: Awaited<ReturnType<typeof pass>>, scope: string) => report.flagged.filter((a) => a.scope === scope);
  const chargeArgs = { customerId: "cus_1", amountCents: 1_250, currency: "EUR" };

  it("flags nothing for ordinary retries within one session", async () => {
    const scope = `clean-${randomUUID().slice(0, 6)}`;
    for (let i = 0; i < 5; i++) {
      // five orders, each its own action (its own amount) retried under its own key
      const order = { ...chargeArgs, amountCents: 1_000 + i };
      await call(charge, scope, `order-${i}`, order);
      clock.ms += 800;
      await call(charge, scope, `order-${i}`, order);
    }
    const report = await pass();
    expect(ofScope(report, scope)).toEqual([]);
  });

  it("makes a call's kept arguments searchable again when its process stopped between the intent and their copy", async () => {
    const scope = `index-${randomUUID().slice(0, 6)}`;
    await call(charge, scope, "k", { ...chargeArgs, customerId: `cus_${scope}` });
    await t.audit.flush();
    const execution = await t.db.prisma.execution.findFirstOrThrow({ where: { scope }, select: { id: true, arguments: true } });
    expect(execution.arguments).toMatchObject({ customerId: `cus_${scope}` });
    // the copy the search reads never went out (the writer's next batch did not come)
    await t.db.prisma.executionArgumentIndex.delete({ where: { executionId: execution.id } });
    const find = async () => (await findExecutionsByArguments(t.db, [JSON.stringify([`cus_${scope}`])], scope, 50, "top-level values")).found.map((f) => f.id);
    expect(await find()).toEqual([]);
    expect((await pass()).argumentsIndexed).toBe(1);
    expect(await find()).toEqual([execution.id]);
    expect((await pass()).argumentsIndexed).toBe(0);
    // at a server's start, from where the reconciler's scan stands (here, past this execution)
    await t.db.prisma.executionArgumentIndex.delete({ where: { executionId: execution.id } });
    expect(await indexMissingArgumentsAtStart(t.db.prisma)).toBe(1);
    expect(await find()).toEqual([execution.id]);
  });

  it("flags a crash after the side effect as an unknown outcome once its lease passed, once", async () => {
    const scope = `crash-${randomUUID().slice(0, 6)}`;
    await expect(call(charge, scope, "k", { ...chargeArgs, simulate: { outcome: "crash_after_effect" } })).rejects.toBeInstanceOf(CallAbandonedError);
    expect(ofScope(await pass(), scope)).toEqual([]);
    clock.ms += charge.leaseMs + 1;
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
    // the note is the caller's text (a reservation's release note): quoted, so the summary says where it starts and ends
    expect(anomaly.summary).toMatch(/\(its note: \u201c[^\u201d]*simulated exception after the side effect[^\u201d]*\u201d\)/);
    expect(ofScope(await pass(), scope)).toEqual([]);
  });

  it("fills in an outcome the audit log lost when the key store has the result", async () => {
    const scope = `lost-outcome-${randomUUID().slice(0, 6)}`;
    const out = await call(charge, scope, "k", chargeArgs);
    await t.audit.flush();
    if (out.kind !== "executed") throw new Error("expected a first execution");
    await t.db.prisma.execution.update({ where: { id: out.executionId }, data: { outcome: null, finishedAt: null } });
    clock.ms += charge.leaseMs + 1;
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
    const held = t.engine.invoke(charge, async (args, ctx) => {
      await gate;
      return slowRun(args, ctx);
    }, { scope, key: "k", args: registry.parseArgs(charge, chargeArgs) });
    await new Promise((r) => setTimeout(r, 50));
    await t.engine.release({ scope, key: "k", actor: "test", reason: "presumed dead", force: true });
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
    clock.ms += 1_000;
    await t.db.prisma.demoCharge.create({
      data: { id: `ch_${randomUUID()}`, scope, customerId: "c", amountCents: 1, currency: "EUR", idempotencyKey: "never-audited", createdAt: new Date(clock.ms - 500) },
    });
    const found = ofScope(await pass(), scope);
    expect(found.map((a) => a.type)).toEqual(["orphan_unrecorded_effect"]);
  });

  it("flags replays to another session, far-late replays and late fallback matches — not ordinary ones", async () => {
    const scope = `stale-${randomUUID().slice(0, 6)}`;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-a");
    clock.ms += 500;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-a"); // a retry: fine
    clock.ms += 500;
    await call(charge, scope, "conversation-key", chargeArgs, "conv-b"); // another conversation reused the key
    await call(charge, scope, "reused-later", chargeArgs, "conv-c");
    clock.ms += 3 * 3_600_000;
    await call(charge, scope, "reused-later", chargeArgs, "conv-c"); // three hours later
    await call(tickets, scope, null, { title: "printer on fire" }, "conv-d");
    clock.ms += 30_000;
    // keyless, 30 s later: inside the product's own 60 s fallback window, an ordinary retry
    expect((await call(tickets, scope, null, { title: "printer on fire" }, "conv-d")).kind).toBe("replayed");
    // a tool that dedupes keyless calls for ten minutes, whose retries come within a second: the
    // same call five minutes later is past the window
    for (let i = 0; i < 4; i++) {
      await call(slowTickets, scope, null, { title: `lamp ${i}` }, "conv-e");
      clock.ms += 1_000;
      await call(slowTickets, scope, null, { title: `lamp ${i}` }, "conv-e");
    }
    await call(slowTickets, scope, null, { title: "coffee machine" }, "conv-e");
    clock.ms += 5 * 60_000;
    expect((await call(slowTickets, scope, null, { title: "coffee machine" }, "conv-e")).kind).toBe("replayed");

    const found = ofScope(await pass(), scope).filter((a): a is AnomalyOf<"stale_suppression"> => a.type === "stale_suppression");
    const reasons = found.map((a) => a.evidence.reasons.join(" | "));
    expect(found).toHaveLength(3);
    expect(reasons.some((r) => /session conv-b/.test(r))).toBe(true);
    expect(reasons.some((r) => /3\.0 h after the original/.test(r))).toBe(true);
    expect(found.filter((a) => a.tool === "tickets.create")).toEqual([]);
    const keyless = found.find((a) => a.evidence.fallback)!;
    expect(keyless.tool).toBe(slowTickets.name);
    expect(keyless.evidence.reasons.join(" | ")).toMatch(/matched only by its arguments/);
    // one window, the one the evidence names, and no other
    expect(keyless.evidence.staleThresholdMs).toBe(60_000);
    expect(keyless.evidence.reasons).toHaveLength(1);
    expect(keyless.evidence.reasons[0]).toMatch(/5\.0 min after the original, beyond the stale threshold of this tool's replays in this scope, 1\.0 min \(/);
    expect(keyless.evidence.reasons[0]).not.toMatch(/window/);
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
  const t = useEngineFixture("redis");
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools, cannotTell]);
  const charge = registry.get("payments.charge");
  const chargeArgs = (customerId: string, outcome?: string) => ({ customerId, amountCents: 2_000, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) });

  const call = (tool: ToolDefinition, scope: string, key: string, args: Record<string, unknown>) =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args) });
  const pass = async (options: ReconcileOptions = {}) => {
    await t.audit.flush();
    clock.ms += 1;
    return reconcile(reconcileDeps({ db: t.db, store: t.store, engine: t.engine, registry }), { nowMs: clock.ms, settleMs: 0, effectGraceMs: 0, ...options });
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
    const failing = t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope, key: "k", args: registry.parseArgs(charge, chargeArgs("cus_2")) });
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
    clock.ms += charge.leaseMs + 1;
    const early = await pass();
    expect(early.flagged.filter((a) => a.scope === scope).map((a) => a.type)).toEqual(["orphan_unknown_outcome"]);
    expect(probedIn(early, scope)).toEqual([]);
    clock.ms += 60_000;
    expect(probedIn(await pass(), scope)).toMatchObject([{ state: "stuck", answer: "applied", action: "resolved" }]);
    expect((await t.store.get(scope, "k"))?.status).toBe("done");
    expect((await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope } })).status).toBe("resolved");
  });

  it("takes held keys in turn: a key its tool cannot tell about does not keep the others from being asked", async () => {
    const scope = `p-turns-${randomUUID().slice(0, 6)}`;
    for (const key of ["k1", "k2", "k3"]) {
      await expect(call(cannotTell, scope, key, { amount: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
      clock.ms += 1_000;
    }
    // one probe per pass, and keys the tool could not tell about may be asked again at once: a
    // pass that started from the newest key every time would ask k3 and nothing else
    const asked: string[] = [];
    for (let i = 0; i < 8 && new Set(asked).size < 3; i++) {
      asked.push(...probedIn(await pass({ maxProbes: 1, reprobeAfterMs: 0 }), scope).map((p) => p.key));
    }
    expect(new Set(asked)).toEqual(new Set(["k1", "k2", "k3"]));
    expect(asked).toHaveLength(3);
  });

  it("asks about a key that has just become unknown at the next pass, while it works through older ones", async () => {
    const scope = `p-fresh-${randomUUID().slice(0, 6)}`;
    for (let i = 1; i <= 8; i++) {
      await expect(call(cannotTell, scope, `old-${i}`, { amount: i })).rejects.toBeInstanceOf(OutcomeUnknownError);
      clock.ms += 1_000;
    }
    const first = probedIn(await pass({ maxProbes: 2 }), scope).map((p) => p.key);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThanOrEqual(2);
    await expect(call(cannotTell, scope, "fresh", { amount: 99 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const next = probedIn(await pass({ maxProbes: 2 }), scope).map((p) => p.key);
    expect(next).toContain("fresh");
    expect(next.filter((k) => first.includes(k))).toEqual([]);
  });

  it("asks about a bounded number of keys per pass", async () => {
    const scope = `p-bounded-${randomUUID().slice(0, 6)}`;
    for (const key of ["a", "b", "c"]) {
      await expect(call(charge, scope, key, chargeArgs(`cus_${key}`, "throw_after_effect"))).rejects.toBeInstanceOf(OutcomeUnknownError);
    }
    // other tests' held keys share the passes: count this scope's until all three were asked
    const perPass: number[] = [];
    for (let i = 0; i < 10 && perPass.reduce((a, b) => a + b, 0) < 3; i++) perPass.push(probedIn(await pass({ maxProbes: 2 }), scope).length);
    expect(perPass.reduce((a, b) => a + b, 0)).toBe(3);
    expect(Math.max(...perPass)).toBeLessThanOrEqual(2);
    // resolved by their tool's answers: nothing left to ask
    expect(probedIn(await pass({ maxProbes: 2 }), scope)).toHaveLength(0);
    expect(await charges(scope)).toBe(3);
  });
});

describe("the reconciler's scans continue where the previous pass left them", () => {
  // the demo tools stamp their effects with the wall clock: this clock follows it
  let offsetMs = 0;
  const now = () => Date.now() + offsetMs;
  const t = useEngineFixture("redis", { now });
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const deps = () => ({ prisma: t.db.prisma, store: t.store, listEffects: registry.listEffects.bind(registry) });

  const call = (key: string, session: string, outcome?: string) =>
    t.engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), {
      scope: "cursor",
      key,
      session,
      args: registry.parseArgs(charge, { customerId: `cus_${key}`, amountCents: 100, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) }),
    });
  const pass = async (options: ReconcileOptions = {}) => {
    await t.audit.flush();
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
    // 3 finished (lost-completion scan) + 1 unknown + all 4 (fresh-key scan); 1 replay; 4 charges
    expect(first.examined).toEqual({ executions: 8, suppressions: 1, effects: 4, keys: 0 });
    expect(first.flagged.map((a) => a.type).sort()).toEqual(["orphan_unknown_outcome", "stale_suppression"]);

    const second = await pass();
    expect(second.examined).toEqual({ executions: 0, suppressions: 0, effects: 0, keys: 0 });
    expect(second.flagged).toEqual([]);

    await call("e", "run-1");
    await call("e", "run-1");
    const third = await pass();
    // the new execution, read by the lost-completion and the fresh-key scans
    expect(third.examined).toEqual({ executions: 2, suppressions: 1, effects: 1, keys: 0 });
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
    // the log restores it: stored resolved, counted in the key-store loss incident
    const lost = await t.db.prisma.anomaly.findMany({ where: { type: "orphan_lost_completion", key: "k" } });
    expect(lost.map((a) => [a.status, (a.evidence as { retry?: string }).retry])).toContainEqual(["resolved", "restored_from_audit_log"]);
    expect(nextRound.flagged.some((a) => a.type === "key_store_loss")).toBe(true);
    expect(nextRound.examined.executions).toBeGreaterThan(1);
  });
});

// A tool that records its side effects in memory, so its retry gaps are this suite's alone.
const placed: string[] = [];
const placeOrder = defineTool({
  name: "orders.place",
  kind: "write",
  description: "place an order (test)",
  schema: z.strictObject({ sku: z.string(), qty: z.number().int() }),
  fallbackDedupe: true,
  async run(args, ctx) {
    const orderId = `ord_${placed.length + 1}`;
    placed.push(`${ctx.scope}/${ctx.key}`);
    return { body: { orderId, ...args } };
  },
});

describe.each(["redis", "pglite"] as const)("fresh-key duplicates (%s key store)", (kind) => {
  const t = useEngineFixture(kind);
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools, placeOrder]);
  const charge = registry.get("payments.charge");
  const orders = registry.get("orders.place");

  type Extra = { session?: string; caller?: string; keySource?: "orchestrator" | "model" };
  const call = (tool: ToolDefinition, scope: string, key: string | null, args: Record<string, unknown>, extra: Extra = {}) =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope, key, args: registry.parseArgs(tool, args), session: extra.session ?? "conv-1", caller: extra.caller ?? null, keySource: extra.keySource });
  const pass = async (options: ReconcileOptions = {}) => {
    await t.audit.flush();
    clock.ms += 1;
    return reconcile({ prisma: t.db.prisma, store: t.store }, { nowMs: clock.ms, settleMs: 0, ...options });
  };
  const duplicatesIn = (report: Awaited<ReturnType<typeof pass>>, scope: string) =>
    report.flagged.filter((a): a is AnomalyOf<"fresh_key_duplicate"> => a.type === "fresh_key_duplicate" && a.scope === scope);
  const charges = (scope: string) => t.db.prisma.demoCharge.count({ where: { scope } });
  const newScope = (label: string) => `${label}-${randomUUID().slice(0, 6)}`;
  const args = (customerId: string) => ({ customerId, amountCents: 4_200, currency: "EUR" });

  it("one action sent 3 times under 3 fresh orchestrator keys: 3 charges, each duplicate flagged against the original with its evidence", async () => {
    const scope = newScope("fresh");
    const answers = [];
    for (const [i, key] of ["order-1", "order-1-retry", "order-1-again"].entries()) {
      answers.push(await call(charge, scope, key, args("cus_fk"), { session: `conv-${i}`, caller: `token-${i}` }));
      clock.ms += 1_500;
    }
    expect(answers.map((a) => a.kind)).toEqual(["executed", "executed", "executed"]);
    expect(await charges(scope)).toBe(3);

    const found = duplicatesIn(await pass(), scope);
    expect(found.map((a) => a.key).sort()).toEqual(["order-1-again", "order-1-retry"]);
    const [retry, again] = ["order-1-retry", "order-1-again"].map((k) => found.find((a) => a.key === k)!);
    const ids = answers.map((a) => (a.kind === "executed" ? a.executionId : ""));
    expect(retry.tool).toBe("payments.charge");
    expect(retry.dedupeKey).toBe(`fresh_key_duplicate:${ids[1]}`);
    expect(retry.evidence).toMatchObject({
      gapMs: 1_500,
      windowMs: 60_000,
      windowSource: "default",
      original: { executionId: ids[0], key: "order-1", session: "conv-0", caller: "token-0", outcome: "succeeded", resultStatus: 200, fallback: false },
      duplicate: { executionId: ids[1], key: "order-1-retry", session: "conv-1", caller: "token-1", outcome: "succeeded", resultStatus: 200 },
    });
    expect(JSON.parse(retry.evidence.original.resultBody!).chargeId).toBe(JSON.parse(answers[0].body).chargeId);
    expect(JSON.parse(retry.evidence.duplicate.resultBody!).chargeId).toBe(JSON.parse(answers[1].body).chargeId);
    // both duplicates name the first call as their original
    expect(again.evidence).toMatchObject({ gapMs: 3_000, original: { executionId: ids[0] }, duplicate: { executionId: ids[2], key: "order-1-again" } });
    expect(retry.summary).toMatch(/^payments\.charge ran twice for identical arguments under two keys, 1\.5 s apart \(within the default retry window of 1\.0 min\)/);

    // stored once each, and not found again by the next pass
    expect(duplicatesIn(await pass(), scope)).toEqual([]);
    const stored = await t.db.prisma.anomaly.findMany({ where: { scope, type: "fresh_key_duplicate" } });
    expect(stored.map((a) => a.key).sort()).toEqual(["order-1-again", "order-1-retry"]);
  });

  it("the same action under 3 fresh advisory keys: 1 charge, 2 fresh_key suppressions, nothing flagged", async () => {
    const scope = newScope("advisory");
    const answers = [];
    for (const key of ["m-1", "m-2", "m-3"]) {
      answers.push(await call(charge, scope, key, args("cus_fk"), { keySource: "model" }));
      clock.ms += 1_500;
    }
    expect(answers.map((a) => a.kind)).toEqual(["executed", "replayed", "replayed"]);
    expect(new Set(answers.map((a) => JSON.parse(a.body).chargeId)).size).toBe(1);
    expect(await charges(scope)).toBe(1);
    await t.audit.flush();
    expect(await t.db.prisma.suppression.count({ where: { scope, kind: "fresh_key" } })).toBe(2);
    expect(duplicatesIn(await pass(), scope)).toEqual([]);
    expect(await t.db.prisma.anomaly.count({ where: { scope } })).toBe(0);
  });

  it("does not flag a genuine repeat farther apart than the default window, nor other arguments, scopes or tools", async () => {
    const scope = newScope("repeat");
    const other = newScope("other-tenant");
    await call(charge, scope, "monday", args("cus_r"));
    await call(charge, other, "monday", args("cus_r")); // another tenant: its own action
    clock.ms += 1_000;
    await call(charge, scope, "other-amount", { ...args("cus_r"), amountCents: 4_300 });
    await call(orders, scope, "same-args-other-tool", { sku: "x", qty: 1 });
    clock.ms += 5 * 60_000;
    await call(charge, scope, "five-minutes-later", args("cus_r"));
    expect(await charges(scope)).toBe(3);
    const report = await pass();
    expect(duplicatesIn(report, scope)).toEqual([]);
    expect(duplicatesIn(report, other)).toEqual([]);
  });

  it("derives the window from the tool's retry gaps once it has enough replays", async () => {
    const scope = newScope("derived");
    // 30 retries of 30 orders, each within a second: the retry cluster ends at 1 s
    for (let i = 0; i < 30; i++) {
      await call(orders, scope, `o-${i}`, { sku: `sku-${i}`, qty: 1 });
      clock.ms += 1_000;
      expect((await call(orders, scope, `o-${i}`, { sku: `sku-${i}`, qty: 1 })).kind).toBe("replayed");
      clock.ms += 50;
    }
    await call(orders, scope, "a", { sku: "lamp", qty: 2 });
    clock.ms += 5_000;
    await call(orders, scope, "a-fresh", { sku: "lamp", qty: 2 }); // a retry under a fresh key: flagged
    clock.ms += 30_000;
    await call(orders, scope, "b", { sku: "lamp", qty: 2 }); // 30 s on: beyond the 10 s window, a new order
    const found = duplicatesIn(await pass(), scope);
    expect(found.map((a) => a.key)).toEqual(["a-fresh"]);
    expect(found[0].evidence).toMatchObject({ windowSource: "retry_gaps", windowMs: 10_000, gapMs: 5_000 });
    expect(found[0].evidence.samples).toBeGreaterThanOrEqual(30);
  });

  it("counts only executions that may have had an effect: not a call its tool said did not run", async () => {
    const scope = newScope("not-run");
    await expect(call(charge, scope, "first", { ...args("cus_n"), simulate: { outcome: "error" } })).rejects.toBeInstanceOf(ToolFailedError);
    clock.ms += 2_000;
    await call(charge, scope, "second", args("cus_n")); // identical arguments, not the same: the first did nothing
    clock.ms += 2_000;
    // an unknown outcome may have happened: a fresh-key retry after it is flagged
    await expect(call(charge, scope, "third", { ...args("cus_u"), simulate: { outcome: "throw_after_effect" } })).rejects.toBeInstanceOf(OutcomeUnknownError);
    clock.ms += 2_000;
    await call(charge, scope, "fourth", { ...args("cus_u"), simulate: { outcome: "throw_after_effect" } }).catch(() => null);
    const found = duplicatesIn(await pass(), scope);
    expect(found.map((a) => [a.evidence.original.key, a.key])).toEqual([["third", "fourth"]]);
    expect(found[0].evidence.original.outcome).toBe("unknown");
  });

  it("does not match keyless calls with each other; a keyed call identical to a keyless one is flagged", async () => {
    const scope = newScope("keyless");
    await call(orders, scope, null, { sku: "mug", qty: 1 });
    clock.ms += orders.fallbackTtlMs! + 1_000; // the fallback window has passed: the same keyless call runs again
    const again = await call(orders, scope, null, { sku: "mug", qty: 1 });
    expect(again.kind).toBe("executed");
    expect(duplicatesIn(await pass(), scope)).toEqual([]);
    clock.ms += 2_000;
    await call(orders, scope, "mug-order", { sku: "mug", qty: 1 });
    const found = duplicatesIn(await pass(), scope);
    expect(found.map((a) => [a.evidence.original.fallback, a.evidence.duplicate.key])).toEqual([[true, "mug-order"]]);
  });

  it("judges a duplicate still running once it has ended: the scan waits for it", async () => {
    const scope = newScope("running");
    await call(charge, scope, "k1", args("cus_w"));
    clock.ms += 1_000;
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    const run = registry.runnerFor(charge, t.db.prisma);
    const held = t.engine.invoke(charge, async (a, ctx) => {
      await gate;
      return run(a, ctx);
    }, { scope, key: "k2", args: registry.parseArgs(charge, args("cus_w")) });
    await new Promise((r) => setTimeout(r, 50));
    clock.ms += 1_000;
    await call(charge, scope, "k3", { ...args("cus_w"), amountCents: 1 }); // after the running one
    expect(duplicatesIn(await pass(), scope)).toEqual([]);
    finish();
    await held;
    const found = duplicatesIn(await pass(), scope);
    expect(found.map((a) => a.key)).toEqual(["k2"]);
    const cursor = await t.db.prisma.reconcilerCursor.findUniqueOrThrow({ where: { name: "fresh_key_duplicates" } });
    expect(cursor.caughtUp).toBe(true);
  });

  it("learns retry gaps per tenant: tenant A's fast replays change neither B's retry window nor B's stale threshold", async () => {
    const a = newScope("tenant-a");
    const b = newScope("tenant-b");
    // tenant A: 30 retries each a second after its call, and 30 keys reused an hour later. On their
    // own they set a 10 s retry window and a 1 min stale threshold for A.
    for (let i = 0; i < 30; i++) {
      await call(orders, a, `fast-${i}`, { sku: `a-${i}`, qty: 1 });
      clock.ms += 1_000;
      expect((await call(orders, a, `fast-${i}`, { sku: `a-${i}`, qty: 1 })).kind).toBe("replayed");
    }
    clock.ms += 3_600_000;
    for (let i = 0; i < 30; i++) expect((await call(orders, a, `fast-${i}`, { sku: `a-${i}`, qty: 1 })).kind).toBe("replayed");
    await pass();

    // tenant B: a slow client that retries two minutes after each call, and one action retried
    // 20 s later under a fresh key
    for (let i = 0; i < 25; i++) {
      await call(orders, b, `slow-${i}`, { sku: `b-${i}`, qty: 1 });
      clock.ms += 120_000;
      expect((await call(orders, b, `slow-${i}`, { sku: `b-${i}`, qty: 1 })).kind).toBe("replayed");
    }
    await call(orders, b, "lamp", { sku: "lamp", qty: 2 });
    clock.ms += 20_000;
    await call(orders, b, "lamp-fresh", { sku: "lamp", qty: 2 });
    const report = await pass();
    const forB = report.flagged.filter((x) => x.scope === b);
    // B's own 25 replays form one cluster at 2 min: none is stale; its fresh-key retry lies within
    // the retry window B's own replays give (a 10 min window at most, above its 2 min retries)
    expect(forB.filter((x) => x.type === "stale_suppression")).toEqual([]);
    const duplicates = duplicatesIn(report, b);
    expect(duplicates.map((x) => x.key)).toEqual(["lamp-fresh"]);
    expect(duplicates[0].evidence.windowMs).toBeGreaterThan(20_000);
  });
});
