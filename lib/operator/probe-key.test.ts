import { randomUUID } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { ProbeAnswer } from "@/lib/idempotency/tool";
import { CallAbandonedError, InvalidStateError, NotFoundError, OutcomeUnknownError, UnknownOutcomeKeyError } from "@/lib/idempotency/errors";
import { defineTool, demoTools, ToolRegistry, type ToolDefinition } from "@/lib/tools";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { probeKey } from "./probe-key";

// A ledger whose own records cannot say whether a posting went through, one whose status probe
// never answers, one that answers nonsense, and one without a probe.
const ledgerTool = (name: string, probe?: () => Promise<ProbeAnswer>) =>
  defineTool({
    name,
    kind: "write",
    description: "post to a ledger (test)",
    schema: z.strictObject({ amount: z.number().int() }),
    async run() {
      throw new Error("ledger connection reset after sending");
    },
    ...(probe ? { probe } : {}),
  });
const cannotTell = ledgerTool("ledger.post", async () => ({ outcome: "unknown", note: "the ledger is offline" }));
const neverAnswers = ledgerTool("ledger.post_slow_probe", () => new Promise(() => {}));
const answersNonsense = ledgerTool("ledger.post_odd_probe", async () => ({ outcome: "applied", status: 503, body: null }));
const noProbe = ledgerTool("ledger.post_no_probe");
// a probe that answers when the test says so
// a ledger that knows the keys it was sent: applied for the one it charged, nothing for any other
const keyAware = defineTool({
  name: "ledger.post_key_aware",
  kind: "write",
  description: "post to a ledger (test)",
  schema: z.strictObject({ amount: z.number().int() }),
  async run() {
    throw new Error("ledger connection reset after sending");
  },
  probe: async (ctx) => (ctx.key === "model-key-1" ? { outcome: "applied", status: 200, body: { posted: true } } : { outcome: "not_applied" }),
});
const noAnswer = () => {};
let answerGated: (answer: ProbeAnswer) => void = noAnswer;
const gated = ledgerTool("ledger.post_gated_probe", () => new Promise<ProbeAnswer>((resolve) => (answerGated = resolve)));

describe("probeKey: asking a key's tool whether its call happened", () => {
  const t = useEngineFixture("redis");
  const clock = t.clock;
  const registry = new ToolRegistry([...demoTools, cannotTell, neverAnswers, answersNonsense, noProbe, gated, keyAware]);
  const charge = registry.get("payments.charge");
  const chargeArgs = (customerId: string, simulate?: Record<string, unknown>) => ({ customerId, amountCents: 1_500, currency: "EUR", ...(simulate ? { simulate } : {}) });
  const runtime = () => ({ db: t.db, store: t.store, engine: t.engine, registry });
  const scope = () => `probe-${randomUUID().slice(0, 8)}`;
  const operator = "ops@example.com";

  const call = (tool: ToolDefinition, s: string, key: string, args: Record<string, unknown>) =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope: s, key, args: registry.parseArgs(tool, args) });
  const actionsOf = async (s: string, key: string) => t.db.prisma.operatorAction.findMany({ where: { scope: s, key }, orderBy: { at: "asc" } });

  it("applied: the key is resolved with the tool's result, and a retry replays it without charging again", async () => {
    const s = scope();
    await expect(call(charge, s, "k", chargeArgs("cus_a", { outcome: "throw_after_effect" }))).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");

    const out = await probeKey(runtime(), { scope: s, key: "k", actor: operator });
    const [row] = await t.db.prisma.demoCharge.findMany({ where: { scope: s } });
    expect(out.answer).toMatchObject({ outcome: "applied", status: 200, body: { chargeId: row.id } });
    expect(out.action).toBe("resolved");
    expect(out.record?.status).toBe("done");
    expect(JSON.parse(out.record!.result!.body)).toMatchObject({ chargeId: row.id, customerId: "cus_a" });

    const retry = await call(charge, s, "k", chargeArgs("cus_a", { outcome: "throw_after_effect" }));
    expect(retry.kind).toBe("replayed");
    expect(JSON.parse(retry.body).chargeId).toBe(row.id);
    expect(await t.db.prisma.demoCharge.count({ where: { scope: s } })).toBe(1);

    const [action] = await actionsOf(s, "k");
    expect(action).toMatchObject({ id: out.actionId, actor: operator, action: "resolve" });
    expect(action.reason).toMatch(/payments\.charge answered its status probe: applied \(HTTP 200\): resolved with its result/);
    expect(action.stateBefore).toMatchObject({ state: "unknown" });
    expect(action.stateAfter).toMatchObject({ state: "done", probe: { outcome: "applied", status: 200 } });
    await t.audit.flush();
    expect((await t.db.prisma.execution.findFirst({ where: { scope: s, key: "k" } }))?.outcome).toBe("resolved");
  });

  it("not applied: the key is released, and the retry runs the side effect once", async () => {
    const s = scope();
    // the call failed before charging, but said nothing a key could be freed on
    const failing = t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope: s, key: "k", args: registry.parseArgs(charge, chargeArgs("cus_b")) });
    await expect(failing).rejects.toBeInstanceOf(OutcomeUnknownError);
    await expect(call(charge, s, "k", chargeArgs("cus_b"))).rejects.toBeInstanceOf(UnknownOutcomeKeyError);

    const out = await probeKey(runtime(), { scope: s, key: "k", actor: operator });
    expect(out).toMatchObject({ answer: { outcome: "not_applied" }, action: "released", record: null });
    expect(await t.store.get(s, "k")).toBeNull();

    const retry = await call(charge, s, "k", chargeArgs("cus_b"));
    expect(retry.kind).toBe("executed");
    expect(await t.db.prisma.demoCharge.count({ where: { scope: s } })).toBe(1);
    const [action] = await actionsOf(s, "k");
    expect(action).toMatchObject({ action: "release", stateAfter: { state: "absent", probe: { outcome: "not_applied" } } });
  });

  it("an answer about a call whose key another call took meanwhile decides nothing: the newer call stays held", async () => {
    for (const answer of [{ outcome: "not_applied" }, { outcome: "applied", status: 200, body: { posted: true } }] as const) {
      const s = scope();
      await expect(call(gated, s, "k", { amount: 7 })).rejects.toBeInstanceOf(OutcomeUnknownError);
      const first = (await t.store.get(s, "k"))!;
      const asking = probeKey(runtime(), { scope: s, key: "k", actor: "reconciler" });
      await vi.waitFor(() => expect(answerGated).not.toBe(noAnswer));
      // while the tool is asked: an operator releases the key and the next call's outcome is unknown too
      await t.engine.release({ scope: s, key: "k", actor: operator, reason: "checked by hand" });
      await expect(call(gated, s, "k", { amount: 7 })).rejects.toBeInstanceOf(OutcomeUnknownError);
      const second = (await t.store.get(s, "k"))!;
      expect(second.token).not.toBe(first.token);

      answerGated(answer);
      answerGated = noAnswer;
      const out = await asking;
      expect(out.action).toBe("none");
      expect(out.record).toEqual(second);
      expect(await t.store.get(s, "k")).toEqual(second);
      await expect(call(gated, s, "k", { amount: 7 })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
      const [action] = await actionsOf(s, "k");
      expect(action).toMatchObject({ action: "probe", actor: "reconciler" });
      expect(action.reason).toMatch(/but the key was left as it is: another call holds this key now/);
    }
  });

  it("an advisory call's arguments window is asked about with the key its call was sent with, not its own", async () => {
    const s = scope();
    const invoke = () =>
      t.engine.invoke(keyAware, registry.runnerFor(keyAware, t.db.prisma), { scope: s, key: "model-key-1", keySource: "model", args: registry.parseArgs(keyAware, { amount: 9 }) });
    await expect(invoke()).rejects.toBeInstanceOf(OutcomeUnknownError);
    const held = (await t.store.list({ scope: s, state: "unknown", limit: 10, nowMs: clock.ms })).items.map((r) => r.key).sort();
    expect(held).toHaveLength(2);
    const windowKey = held.find((k) => k.startsWith("fallback:"))!;
    // the ledger never saw the window key: asked about it, it would say not applied and free the window
    const out = await probeKey(runtime(), { scope: s, key: windowKey, actor: operator });
    expect(out).toMatchObject({ answer: { outcome: "applied" }, action: "resolved", record: { status: "done" } });
  });

  it("cannot tell: the key stays held, and the answer is recorded", async () => {
    const s = scope();
    await expect(call(cannotTell, s, "k", { amount: 5 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const out = await probeKey(runtime(), { scope: s, key: "k", actor: operator });
    expect(out).toMatchObject({ answer: { outcome: "unknown", note: "the ledger is offline" }, action: "none", record: { status: "unknown" } });
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    await expect(call(cannotTell, s, "k", { amount: 5 })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    const [action] = await actionsOf(s, "k");
    expect(action).toMatchObject({ action: "probe", actor: operator, stateAfter: { state: "unknown", probe: { outcome: "unknown", note: "the ledger is offline" } } });
    expect(action.reason).toMatch(/cannot tell \(the ledger is offline\): the key stays unknown/);
  });

  it("a probe that does not answer in time, or answers something that is not a result, cannot tell", async () => {
    const s = scope();
    await expect(call(neverAnswers, s, "slow", { amount: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const slow = await probeKey(runtime(), { scope: s, key: "slow", actor: operator, timeoutMs: 100 });
    expect(slow).toMatchObject({ answer: { outcome: "unknown", note: "the tool did not answer within 100 ms" }, action: "none" });

    await expect(call(answersNonsense, s, "odd", { amount: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const odd = await probeKey(runtime(), { scope: s, key: "odd", actor: operator });
    expect(odd.answer).toMatchObject({ outcome: "unknown", note: expect.stringMatching(/applied with status 503, which is not a result/) });
    expect((await t.store.get(s, "odd"))?.status).toBe("unknown");
  });

  it("asks about a stuck key once its lease has passed, not while its call may still be running", async () => {
    const s = scope();
    await expect(call(charge, s, "k", chargeArgs("cus_c", { outcome: "crash_after_effect" }))).rejects.toBeInstanceOf(CallAbandonedError);
    await expect(probeKey(runtime(), { scope: s, key: "k", actor: operator, nowMs: clock.ms })).rejects.toThrow(/only stuck or unknown keys are asked about; this key is inflight/);
    clock.ms += charge.leaseMs + 1;
    const out = await probeKey(runtime(), { scope: s, key: "k", actor: operator, nowMs: clock.ms });
    expect(out).toMatchObject({ answer: { outcome: "applied" }, action: "resolved", record: { status: "done" } });
    expect((await call(charge, s, "k", chargeArgs("cus_c", { outcome: "crash_after_effect" }))).kind).toBe("replayed");
    expect(await t.db.prisma.demoCharge.count({ where: { scope: s } })).toBe(1);
  });

  it("refuses keys it cannot ask about: absent, done, or of a tool without a status probe", async () => {
    const s = scope();
    await expect(probeKey(runtime(), { scope: s, key: "never-seen", actor: operator })).rejects.toBeInstanceOf(NotFoundError);
    await call(charge, s, "done", chargeArgs("cus_d"));
    await expect(probeKey(runtime(), { scope: s, key: "done", actor: operator })).rejects.toThrow(/this key is done/);
    await expect(call(noProbe, s, "blind", { amount: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const refused = await probeKey(runtime(), { scope: s, key: "blind", actor: operator }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(InvalidStateError);
    expect((refused as Error).message).toMatch(/^ledger\.post_no_probe cannot be asked whether a call happened: it has no status probe/);
    // nothing was recorded for a refusal
    expect(await t.db.prisma.operatorAction.count({ where: { scope: s } })).toBe(0);
  });
});
