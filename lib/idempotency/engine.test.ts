import { randomUUID } from "node:crypto";
import { PrismaPg } from "@prisma/adapter-pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "@/generated/prisma/client";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { bucketOf } from "@/lib/store/redis/key-names";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { openTestStore, STORE_KINDS, type StoreUnderTest } from "@/test/support/stores";
import { Engine } from "./engine";
import {
  CallAbandonedError,
  ConflictError,
  InvalidKeyError,
  InvalidStateError,
  MismatchError,
  MissingKeyError,
  OutcomeUnknownError,
  StuckKeyError,
  ToolFailedError,
  UnavailableError,
  UnknownOutcomeKeyError,
} from "./errors";
import { AbandonCall, DEFAULT_POLICY, FinalToolError, NotRunError, OutcomeUnknown, type RunTool, type ToolPolicy } from "./tool";

const charge: ToolPolicy = {
  name: "payments.charge",
  kind: "write",
  ttlMs: 60_000,
  leaseMs: 5_000,
  stuckPolicy: "block",
  fallbackTtlMs: null,
  dedupes: false,
};
const lookup: ToolPolicy = { ...charge, name: "payments.get_balance", kind: "read" };

/** A tool that counts its side effects, so every test can assert how often it really ran. */
function countingTool(result: (n: number) => unknown = (n) => ({ chargeId: `ch_${n}` })) {
  const calls: { args: unknown; executionId: string | null }[] = [];
  const run: RunTool = async (args, ctx) => {
    calls.push({ args, executionId: ctx.executionId });
    return { body: result(calls.length) };
  };
  return { run, calls };
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe.each(STORE_KINDS)("engine on the %s store", (kind) => {
  const t = useEngineFixture(kind, { startMs: 1_800_000_000_000, audit: { mode: "durable", flushIntervalMs: 5 } });
  const clock = t.clock;
  const scope = () => `s${randomUUID().slice(0, 8)}`;

  it("runs read tools without a key and without touching the store", async () => {
    const tool = countingTool(() => ({ balanceCents: 0 }));
    const s = scope();
    const out = await t.engine.invoke(lookup, tool.run, { scope: s, args: { customerId: "c1" } });
    expect(out).toEqual({ kind: "read", status: 200, body: '{"balanceCents":0}' });
    expect(tool.calls).toHaveLength(1);
    expect((await t.store.list({ scope: s, limit: 10, nowMs: clock.ms })).items).toEqual([]);
  });

  it("runs a first call once and replays the stored body to duplicates, with the gap", async () => {
    const tool = countingTool();
    const s = scope();
    const req = { scope: s, key: "order-1", args: { amountCents: 500, currency: "EUR" }, session: "run-a" };
    const first = await t.engine.invoke(charge, tool.run, req);
    expect(first).toMatchObject({ kind: "executed", status: 200, body: '{"chargeId":"ch_1"}' });
    clock.ms += 1_500;
    const second = await t.engine.invoke(charge, tool.run, { ...req, args: { currency: "EUR", amountCents: 500 } });
    expect(second).toMatchObject({ kind: "replayed", status: 200, body: '{"chargeId":"ch_1"}', gapMs: 1_500 });
    expect(tool.calls).toHaveLength(1);

    await t.audit.flush();
    const execs = await t.db.prisma.execution.findMany({ where: { scope: s } });
    expect(execs).toHaveLength(1);
    expect(execs[0]).toMatchObject({ outcome: "succeeded", resultStatus: 200, session: "run-a" });
    const sup = await t.db.prisma.suppression.findMany({ where: { scope: s } });
    expect(sup).toHaveLength(1);
    expect(sup[0]).toMatchObject({ kind: "replay", gapMs: 1_500, originalSession: "run-a", originalExecutionId: execs[0].id });
  });

  it("writes the intent before the tool runs", async () => {
    const s = scope();
    let intentSeen: unknown = "not checked";
    await t.engine.invoke(charge, async (_args, ctx) => {
      intentSeen = await t.db.prisma.execution.findUnique({ where: { id: ctx.executionId! } });
      return { body: { ok: true } };
    }, { scope: s, key: "k", args: {} });
    expect(intentSeen).toMatchObject({ scope: s, key: "k", tool: "payments.charge", outcome: null });
  });

  it("answers 409-conflict while the first call runs, then replays", async () => {
    const s = scope();
    const gate = deferred();
    const started = deferred();
    let runs = 0;
    const slow: RunTool = async () => {
      runs++;
      started.resolve();
      await gate.promise;
      return { body: { done: true } };
    };
    const first = t.engine.invoke(charge, slow, { scope: s, key: "k", args: { a: 1 } });
    await started.promise;
    const err = await t.engine.invoke(charge, slow, { scope: s, key: "k", args: { a: 1 } }).catch((e) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).retryAfterMs).toBeGreaterThan(0);
    gate.resolve();
    await first;
    expect((await t.engine.invoke(charge, slow, { scope: s, key: "k", args: { a: 1 } })).kind).toBe("replayed");
    expect(runs).toBe(1);
  });

  it("reports a stuck key after the lease, and lets a takeover tool run again", async () => {
    const s = scope();
    const crash: RunTool = async () => {
      throw new AbandonCall();
    };
    await expect(t.engine.invoke(charge, crash, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(CallAbandonedError);
    const tool = countingTool();
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(ConflictError);
    clock.ms += charge.leaseMs + 1;
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(StuckKeyError);
    expect(tool.calls).toHaveLength(0);
    const takeover = { ...charge, stuckPolicy: "takeover" as const };
    expect((await t.engine.invoke(takeover, tool.run, { scope: s, key: "k", args: {} })).kind).toBe("executed");
    expect(tool.calls).toHaveLength(1);
  });

  it("refuses a key reused with other arguments", async () => {
    const s = scope();
    const tool = countingTool();
    await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { amountCents: 1 } });
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { amountCents: 2 } })).rejects.toBeInstanceOf(MismatchError);
    expect(tool.calls).toHaveLength(1);
  });

  it("runs an expired key as new", async () => {
    const s = scope();
    const tool = countingTool();
    await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} });
    clock.ms += charge.ttlMs;
    expect((await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).kind).toBe("executed");
    expect(tool.calls).toHaveLength(2);
  });

  it("refuses keyless writes unless the tool opted into fallback dedupe", async () => {
    const s = scope();
    const tool = countingTool();
    await expect(t.engine.invoke(charge, tool.run, { scope: s, args: {} })).rejects.toBeInstanceOf(MissingKeyError);
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "bad\u00e9", args: {} })).rejects.toBeInstanceOf(InvalidKeyError);
    expect(tool.calls).toHaveLength(0);

    const fallback = { ...charge, name: "tickets.create", fallbackTtlMs: 60_000 };
    const a = await t.engine.invoke(fallback, tool.run, { scope: s, args: { title: "x" } });
    const b = await t.engine.invoke(fallback, tool.run, { scope: s, args: { title: "x" } });
    expect(a).toMatchObject({ kind: "executed", fallback: true });
    expect(b).toMatchObject({ kind: "replayed", fallback: true });
    expect(a.kind === "executed" && a.key).toMatch(/^fallback:[0-9a-f]{64}$/);
    clock.ms += 60_000;
    expect((await t.engine.invoke(fallback, tool.run, { scope: s, args: { title: "x" } })).kind).toBe("executed");
    expect(tool.calls).toHaveLength(2);
    await t.audit.flush();
    expect(await t.db.prisma.suppression.count({ where: { scope: s, fallback: true } })).toBe(1);
  });

  it("stores a final error and replays it; only the tool's word that nothing happened releases the key", async () => {
    const s = scope();
    let runs = 0;
    const declines: RunTool = async () => {
      runs++;
      throw new FinalToolError(402, { type: "card_declined" });
    };
    const a = await t.engine.invoke(charge, declines, { scope: s, key: "d", args: {} });
    const b = await t.engine.invoke(charge, declines, { scope: s, key: "d", args: {} });
    expect(a).toMatchObject({ kind: "executed", status: 402, body: '{"type":"card_declined"}' });
    expect(b).toMatchObject({ kind: "replayed", status: 402, body: '{"type":"card_declined"}' });
    expect(runs).toBe(1);

    let attempts = 0;
    const flaky: RunTool = async () => {
      attempts++;
      if (attempts === 1) throw new NotRunError("refused before acting");
      return { body: { ok: attempts } };
    };
    await expect(t.engine.invoke(charge, flaky, { scope: s, key: "f", args: {} })).rejects.toBeInstanceOf(ToolFailedError);
    expect(await t.store.get(s, "f")).toBeNull();
    expect(await t.engine.invoke(charge, flaky, { scope: s, key: "f", args: {} })).toMatchObject({ kind: "executed", body: '{"ok":2}' });
    await t.audit.flush();
    const outcomes = (await t.db.prisma.execution.findMany({ where: { scope: s }, orderBy: { startedAt: "asc" } })).map((e) => e.outcome);
    expect(outcomes.sort()).toEqual(["failed", "final_error", "succeeded"]);
  });

  it("holds the key as unknown after an exception, a timeout or an unknown answer, and never runs it again", async () => {
    const s = scope();
    let effects = 0;
    const cases: [string, RunTool, number, string][] = [
      ["threw", async () => { effects++; throw new Error("socket hang up"); }, 502, "the tool threw: socket hang up"],
      ["timed-out", async () => { effects++; throw new OutcomeUnknown("timed out after 400 ms", true); }, 504, "timed out after 400 ms"],
      ["answered-502", async () => { effects++; throw new OutcomeUnknown("the service answered 502"); }, 502, "the service answered 502"],
    ];
    for (const [key, run, status, note] of cases) {
      const first = await t.engine.invoke(charge, run, { scope: s, key, args: { a: 1 } }).catch((e: unknown) => e);
      expect(first).toBeInstanceOf(OutcomeUnknownError);
      expect((first as OutcomeUnknownError).status).toBe(status);
      const record = await t.store.get(s, key);
      expect(record).toMatchObject({ status: "unknown", outcomeNote: note, unknownAtMs: clock.ms });
      for (let i = 0; i < 5; i++) {
        clock.ms += 10 * charge.leaseMs; // long past the lease: still unknown, never stuck or free
        await expect(t.engine.invoke(charge, run, { scope: s, key, args: { a: 1 } })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
      }
      // callers read why in the same words as the first caller: an exception's message stays with operators
      const retried = (await t.engine.invoke(charge, run, { scope: s, key, args: { a: 1 } }).catch((e: unknown) => e)) as Error;
      expect(retried.message).not.toContain("socket hang up");
      expect(retried.message).toContain(key === "threw" ? "the tool threw an exception after it started" : note);
    }
    expect(effects).toBe(3);
    await t.audit.flush();
    const rows = await t.db.prisma.execution.findMany({ where: { scope: s } });
    expect(rows.map((r) => r.outcome)).toEqual(["unknown", "unknown", "unknown"]);
    expect(await t.db.prisma.suppression.count({ where: { scope: s, kind: "unknown" } })).toBe(18);
  });

  it("sends an unknown call again only for a tool whose service deduplicates, closing the first execution as retried", async () => {
    const s = scope();
    const dedupes: ToolPolicy = { ...charge, dedupes: true };
    let n = 0;
    const run: RunTool = async () => {
      n++;
      if (n === 1) throw new OutcomeUnknown("timed out after 400 ms", true);
      return { body: { attempt: n } };
    };
    const first = await t.engine.invoke(dedupes, run, { scope: s, key: "k", args: {} }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(OutcomeUnknownError);
    // the answer says what a retry does at such a service: it is sent again, not refused with 409
    expect((first as Error).message).toMatch(/a retry with the same key is sent to the service again/);
    expect((first as Error).message).not.toMatch(/409/);
    expect(await t.engine.invoke(dedupes, run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "executed", body: '{"attempt":2}' });
    expect(await t.engine.invoke(dedupes, run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "replayed", body: '{"attempt":2}' });
    expect(n).toBe(2);
    await t.audit.flush();
    const outcomes = (await t.db.prisma.execution.findMany({ where: { scope: s }, orderBy: { startedAt: "asc" } })).map((e) => e.outcome);
    expect(outcomes.sort()).toEqual(["retried", "succeeded"]);
  });

  it("lets an operator release or resolve an unknown key, and refuses a running one without force", async () => {
    const s = scope();
    const boom: RunTool = async () => { throw new Error("boom"); };
    await t.engine.invoke(charge, boom, { scope: s, key: "u1", args: {} }).catch(() => {});
    await t.engine.invoke(charge, boom, { scope: s, key: "u2", args: {} }).catch(() => {});
    await t.engine.release({ scope: s, key: "u1", actor: "ops", reason: "the PSP shows no charge" });
    expect(await t.engine.invoke(charge, countingTool().run, { scope: s, key: "u1", args: {} })).toMatchObject({ kind: "executed" });
    await t.engine.resolve({ scope: s, key: "u2", actor: "ops", reason: "the PSP shows the charge", result: { chargeId: "ch_psp" }, ttlMs: 60_000 });
    expect(await t.engine.invoke(charge, countingTool().run, { scope: s, key: "u2", args: {} })).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_psp"}' });

    const gate = deferred();
    const started = deferred();
    const running = t.engine.invoke(charge, async () => {
      started.resolve();
      await gate.promise;
      return { body: { late: true } };
    }, { scope: s, key: "r", args: {} });
    await started.promise;
    await expect(t.engine.release({ scope: s, key: "r", actor: "ops", reason: "looks stuck" })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(t.engine.resolve({ scope: s, key: "r", actor: "ops", reason: "looks done", result: {}, ttlMs: 60_000 })).rejects.toBeInstanceOf(InvalidStateError);
    await t.engine.release({ scope: s, key: "r", actor: "ops", reason: "looks stuck", force: true });
    gate.resolve();
    await running;
    await t.audit.flush();
    // the result that arrived after the release is a late completion, never a plain success
    const [late] = await t.db.prisma.execution.findMany({ where: { scope: s, key: "r" } });
    expect(late.outcome).toBe("late_completion");
    expect(late.error).toMatch(/released/);
  });

  it("checks an advisory key also by its arguments: one action under three fresh model keys runs once", async () => {
    const s = scope();
    const tool = countingTool();
    const args = { customerId: "c1", amountCents: 500 };
    const answers = [];
    for (const key of ["model-1", "model-2", "model-3"]) {
      answers.push(await t.engine.invoke(charge, tool.run, { scope: s, key, args, keySource: "model" }));
      clock.ms += 1_000;
    }
    expect(tool.calls).toHaveLength(1);
    expect(answers.map((a) => a.kind)).toEqual(["executed", "replayed", "replayed"]);
    expect(new Set(answers.map((a) => a.body))).toEqual(new Set(['{"chargeId":"ch_1"}']));
    // each fresh key now answers like the first call
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "model-2", args, keySource: "model" })).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_1"}' });
    await t.audit.flush();
    expect(await t.db.prisma.suppression.count({ where: { scope: s, kind: "fresh_key" } })).toBe(2);

    // past the window the same arguments are a new action
    clock.ms += DEFAULT_POLICY.fallbackDefaultTtlMs;
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "model-4", args, keySource: "model" })).toMatchObject({ kind: "executed" });
    // keys from the orchestrator are authoritative: never matched by arguments
    for (const key of ["orch-1", "orch-2"]) await t.engine.invoke(charge, tool.run, { scope: s, key, args });
    expect(tool.calls).toHaveLength(4);
  });

  it("holds an advisory call's arguments window with its key: an unknown outcome blocks fresh keys too", async () => {
    const s = scope();
    let effects = 0;
    const boom: RunTool = async () => {
      effects++;
      throw new Error("reset after the charge");
    };
    await expect(t.engine.invoke(charge, boom, { scope: s, key: "m-1", args: { a: 1 }, keySource: "model" })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await expect(t.engine.invoke(charge, boom, { scope: s, key: "m-2", args: { a: 1 }, keySource: "model" })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(effects).toBe(1);
    // the second key was given back: it is not held by anything of its own
    expect(await t.store.get(s, "m-2")).toBeNull();
    // a tool that says nothing happened frees both
    const refuses: RunTool = async () => {
      throw new NotRunError("refused");
    };
    await expect(t.engine.invoke(charge, refuses, { scope: s, key: "m-3", args: { b: 1 }, keySource: "model" })).rejects.toBeInstanceOf(ToolFailedError);
    expect(await t.engine.invoke(charge, countingTool().run, { scope: s, key: "m-4", args: { b: 1 }, keySource: "model" })).toMatchObject({ kind: "executed" });
  });

  describe("Prefer: wait", () => {
    function held() {
      const gate = deferred();
      const started = deferred();
      let effects = 0;
      const run: RunTool = async () => {
        effects++;
        started.resolve();
        await gate.promise;
        return { body: { chargeId: "ch_waited" } };
      };
      return { gate, started, run, effects: () => effects };
    }

    it("holds a duplicate until the running call ends and answers it with the stored result", async () => {
      const s = scope();
      const first = held();
      const a = t.engine.invoke(charge, first.run, { scope: s, key: "w", args: {} });
      await first.started.promise;
      const b = t.engine.invoke(charge, first.run, { scope: s, key: "w", args: {}, waitMs: 10_000 });
      let answered = false;
      void b.then(() => (answered = true));
      await new Promise((r) => setTimeout(r, 200));
      expect(answered).toBe(false);
      first.gate.resolve();
      const [x, y] = await Promise.all([a, b]);
      expect(x).toMatchObject({ kind: "executed", body: '{"chargeId":"ch_waited"}' });
      expect(y).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_waited"}' });
      expect(first.effects()).toBe(1);
      await t.audit.flush();
      // one suppression for the waiting call, none for its wake-ups
      expect(await t.db.prisma.suppression.findMany({ where: { scope: s }, select: { kind: true } })).toEqual([{ kind: "replay" }]);
    });

    it("answers 409 once the wait is over while the call still runs, and the unknown answer when it ends so", async () => {
      const s = scope();
      const first = held();
      const a = t.engine.invoke(charge, first.run, { scope: s, key: "w", args: {} });
      await first.started.promise;
      const t0 = performance.now();
      await expect(t.engine.invoke(charge, first.run, { scope: s, key: "w", args: {}, waitMs: 300 })).rejects.toBeInstanceOf(ConflictError);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
      first.gate.resolve();
      await a;

      const gate = deferred();
      const started = deferred();
      const u = t.engine.invoke(charge, async () => { started.resolve(); await gate.promise; throw new OutcomeUnknown("the service answered 502"); }, { scope: s, key: "u", args: {} });
      await started.promise;
      // its expectation attached at once: on a slow machine it may be answered before `u` is
      const waiting = expect(t.engine.invoke(charge, countingTool().run, { scope: s, key: "u", args: {}, waitMs: 10_000 })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
      setTimeout(() => gate.resolve(), 100);
      await expect(u).rejects.toBeInstanceOf(OutcomeUnknownError);
      await waiting;
    });

    it("ends the wait with the stuck answer when the holder never finishes (a crash sends nothing)", async () => {
      const s = scope();
      await t.engine.invoke(charge, async () => { throw new AbandonCall(); }, { scope: s, key: "c", args: {} }).catch(() => {});
      const waiting = t.engine.invoke(charge, countingTool().run, { scope: s, key: "c", args: {}, waitMs: 20_000 });
      await new Promise((r) => setTimeout(r, 100));
      clock.ms += charge.leaseMs; // the lease passes while it waits
      await expect(waiting).rejects.toBeInstanceOf(StuckKeyError);
    });

    it("holds at most maxWaiters calls per process; beyond, 503 and nothing runs", async () => {
      const s = scope();
      const small = new Engine({ store: t.store, audit: t.audit, now: clock.now, maxWaiters: 1 });
      const first = held();
      const a = small.invoke(charge, first.run, { scope: s, key: "w", args: {} });
      await first.started.promise;
      const b = small.invoke(charge, first.run, { scope: s, key: "w", args: {}, waitMs: 10_000 });
      await new Promise((r) => setTimeout(r, 100));
      await expect(small.invoke(charge, first.run, { scope: s, key: "w", args: {}, waitMs: 10_000 })).rejects.toMatchObject({ code: "unavailable" });
      first.gate.resolve();
      await expect(b).resolves.toMatchObject({ kind: "replayed" });
      await a;
      expect(first.effects()).toBe(1);
    });

    it("holds at most a quarter of its waiting slots for one scope: a tenant that fills its share leaves another able to wait", async () => {
      const [tenantA, tenantB] = [scope(), scope()];
      const small = new Engine({ store: t.store, audit: t.audit, now: clock.now, maxWaiters: 8 });
      const runningA = held();
      const runningB = held();
      const a = small.invoke(charge, runningA.run, { scope: tenantA, key: "w", args: {} });
      const b = small.invoke(charge, runningB.run, { scope: tenantB, key: "w", args: {} });
      await Promise.all([runningA.started.promise, runningB.started.promise]);

      // tenant A sends waiting duplicates until the server refuses one
      const waitingA: Promise<unknown>[] = [];
      let refusedA: unknown = null;
      for (let i = 0; i < 9 && refusedA === null; i++) {
        // each duplicate either takes a waiting slot or is refused; whichever, however long it takes
        const before = small.waitingCalls(tenantA);
        let settled: unknown = undefined;
        const w = small.invoke(charge, runningA.run, { scope: tenantA, key: "w", args: {}, waitMs: 10_000 });
        w.then(() => (settled = null), (err: unknown) => (settled = err));
        await expect.poll(() => settled !== undefined || small.waitingCalls(tenantA) > before, { timeout: 20_000 }).toBe(true);
        if (settled === undefined) waitingA.push(w);
        else refusedA = settled;
      }
      expect(refusedA).toMatchObject({ code: "unavailable", of: "scope", limit: 2 });
      expect(waitingA).toHaveLength(2);

      // tenant B can still wait, and gets its result when its call ends
      const waitingB = small.invoke(charge, runningB.run, { scope: tenantB, key: "w", args: {}, waitMs: 10_000 });
      await new Promise((r) => setTimeout(r, 100));
      runningB.gate.resolve();
      await expect(waitingB).resolves.toMatchObject({ kind: "replayed" });
      await b;
      runningA.gate.resolve();
      for (const w of waitingA) await expect(w).resolves.toMatchObject({ kind: "replayed" });
      await a;
      expect([runningA.effects(), runningB.effects()]).toEqual([1, 1]);
      // the slots are given back: tenant A may wait again
      const again = held();
      const c = small.invoke(charge, again.run, { scope: tenantA, key: "w2", args: {} });
      await again.started.promise;
      const waitingAgain = small.invoke(charge, again.run, { scope: tenantA, key: "w2", args: {}, waitMs: 10_000 });
      await new Promise((r) => setTimeout(r, 50));
      again.gate.resolve();
      await expect(waitingAgain).resolves.toMatchObject({ kind: "replayed" });
      await c;
    });
  });

  it("refuses and records a completion whose fencing token went stale", async () => {
    const s = scope();
    const gate = deferred();
    const started = deferred();
    const held = t.engine.invoke(charge, async () => {
      started.resolve();
      await gate.promise;
      return { body: { who: "first" } };
    }, { scope: s, key: "k", args: {} });
    await started.promise;
    await t.engine.release({ scope: s, key: "k", actor: "ops@example.com", reason: "holder presumed dead", force: true });
    const second = await t.engine.invoke(charge, async () => ({ body: { who: "second" } }), { scope: s, key: "k", args: {} });
    expect(second.kind).toBe("executed");
    gate.resolve();
    expect(await held).toMatchObject({ kind: "executed", lateCompletion: true });
    const record = await t.store.get(s, "k");
    expect(record?.result?.body).toBe('{"who":"second"}');
    await t.audit.flush();
    const late = await t.db.prisma.execution.findMany({ where: { scope: s, outcome: "late_completion" } });
    expect(late).toHaveLength(1);
  });

  it("lets an operator release or resolve only stuck, unknown or (forced) running keys", async () => {
    const s = scope();
    await t.engine.invoke(charge, countingTool().run, { scope: s, key: "done", args: {} });
    await expect(t.engine.release({ scope: s, key: "done", actor: "a", reason: "r" })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(t.engine.release({ scope: s, key: "nope", actor: "a", reason: "r" })).rejects.toBeInstanceOf(InvalidStateError);
    await t.engine.invoke(charge, async () => { throw new AbandonCall(); }, { scope: s, key: "stuck", args: {} }).catch(() => {});
    clock.ms += charge.leaseMs + 1;
    const resolved = await t.engine.resolve({ scope: s, key: "stuck", actor: "a", reason: "charge seen in the PSP", result: { chargeId: "ch_manual" }, ttlMs: 60_000 });
    expect(resolved.after?.status).toBe("done");
    const replay = await t.engine.invoke(charge, countingTool().run, { scope: s, key: "stuck", args: {} });
    expect(replay).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_manual"}' });
  });

  it("runs the side effect once among 200 concurrent calls with one key, 200 times with 200 keys", async () => {
    const s = scope();
    const tool = countingTool();
    const outs = await Promise.allSettled(
      Array.from({ length: 200 }, () => t.engine.invoke(charge, tool.run, { scope: s, key: "same", args: { n: 1 } })),
    );
    expect(tool.calls).toHaveLength(1);
    const kinds = outs.map((o) => (o.status === "fulfilled" ? o.value.kind : (o.reason as Error).constructor.name));
    expect(kinds.filter((k) => k === "executed")).toHaveLength(1);
    expect(kinds.every((k) => ["executed", "replayed", "ConflictError"].includes(k))).toBe(true);

    const many = countingTool();
    await Promise.all(Array.from({ length: 200 }, (_, i) => t.engine.invoke(charge, many.run, { scope: s, key: `k${i}`, args: { n: i } })));
    expect(many.calls).toHaveLength(200);
  });
});

describe("engine fails closed", () => {
  let t: StoreUnderTest;
  beforeAll(async () => {
    t = await openTestStore("pglite");
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it("runs nothing when the key store cannot be reached", async () => {
    const dead = createRedisKeyStore("redis://127.0.0.1:1", { prefix: "idgtest-dead", redis: { connectTimeout: 300, maxRetriesPerRequest: 0, retryStrategy: () => null } });
    const audit = new PrismaAuditWriter(t.db.prisma);
    const engine = new Engine({ store: dead, audit });
    const tool = countingTool();
    const err = await engine.invoke(charge, tool.run, { scope: "s", key: "k", args: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as UnavailableError).component).toBe("key_store");
    expect(tool.calls).toHaveLength(0);
    await dead.close();
  });

  it("runs nothing and gives the key back when the intent cannot be written", async () => {
    // a PostgreSQL client pointed at a port where nothing listens: every write fails
    const unreachable = new PrismaClient({ adapter: new PrismaPg({ connectionString: "postgresql://postgres@127.0.0.1:1/none", connectionTimeoutMillis: 300 }) });
    const engine = new Engine({ store: t.store, audit: new PrismaAuditWriter(unreachable) });
    const tool = countingTool();
    const err = await engine.invoke(charge, tool.run, { scope: "s", key: "k", args: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as UnavailableError).component).toBe("audit_log");
    expect(tool.calls).toHaveLength(0);
    expect(await t.store.get("s", "k")).toBeNull();
    await unreachable.$disconnect();
  });
});

describe("engine after the key store lost its data", () => {
  const t = useEngineFixture("redis");
  const clock = t.clock;
  const scope = () => `loss${randomUUID().slice(0, 8)}`;

  it("answers a duplicate from the audit log instead of running the side effect again", async () => {
    const s = scope();
    const tool = countingTool();
    const first = await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { a: 1 }, session: "x" });
    await t.loseData!();
    clock.ms += 2_000;
    const again = await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { a: 1 }, session: "x" });
    expect(again).toMatchObject({ kind: "replayed", body: first.body, status: 200 });
    expect(tool.calls).toHaveLength(1);
    // the result is back in the store, under the original execution
    const record = await t.store.get(s, "k");
    expect(record).toMatchObject({ status: "done", executionId: first.kind === "executed" ? first.executionId : "?" });
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { a: 1 } })).toMatchObject({ kind: "replayed" });
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: { a: 2 } })).rejects.toBeInstanceOf(MismatchError);
    expect(tool.calls).toHaveLength(1);
  });

  it("keeps a key whose call was running when the data was lost blocked, until an operator releases it", async () => {
    const s = scope();
    await t.engine.invoke(charge, async () => { throw new AbandonCall(); }, { scope: s, key: "k", args: {} }).catch(() => {});
    await t.loseData!();
    const tool = countingTool();
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(ConflictError);
    clock.ms += charge.leaseMs + 1;
    // once its lease passed it is held again in the store, as unknown for that call: listed,
    // counted and probed like any held key, and every retry is told the same
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(await t.store.get(s, "k")).toMatchObject({ status: "unknown", outcomeNote: expect.stringMatching(/never reported an outcome before its lease ended/) });
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(tool.calls).toHaveLength(0);
    await t.engine.release({ scope: s, key: "k", actor: "ops", reason: "checked the PSP: nothing charged" });
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "executed" });
    expect(tool.calls).toHaveLength(1);
  });

  it("keeps a key whose outcome was unknown held after a loss however long after its TTL, until someone decides", async () => {
    const s = scope();
    const tool = countingTool();
    const unknownCall = () => t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope: s, key: "k", args: {} });
    await expect(unknownCall()).rejects.toBeInstanceOf(OutcomeUnknownError);
    // days later (the TTL is a minute), the store loses its data and the caller retries
    clock.ms += 2 * 24 * 3_600_000;
    await t.loseData!();
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);

    // lost soon after the call, retried after the TTL: the bucket's epoch is older than the TTL by then
    const s2 = scope();
    await expect(
      t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope: s2, key: "k", args: {} }),
    ).rejects.toBeInstanceOf(OutcomeUnknownError);
    await t.loseData!();
    clock.ms += 1_000;
    // another key of the same bucket starts the store's new epoch
    const neighbour = Array.from({ length: 10_000 }, (_, i) => `n${i}`).find((k) => bucketOf(s2, k) === bucketOf(s2, "k"))!;
    await t.engine.invoke(charge, tool.run, { scope: s2, key: neighbour, args: {} });
    clock.ms += charge.ttlMs + 60_000;
    await expect(t.engine.invoke(charge, tool.run, { scope: s2, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(tool.calls).toHaveLength(1); // the neighbour only

    // unknown for longer than the recovery window before the loss: still the key's latest call
    const s3 = scope();
    await expect(
      t.engine.invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope: s3, key: "k", args: {} }),
    ).rejects.toBeInstanceOf(OutcomeUnknownError);
    clock.ms += 10 * 24 * 3_600_000;
    await t.loseData!();
    await expect(t.engine.invoke(charge, tool.run, { scope: s3, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    expect(tool.calls).toHaveLength(1);
    expect(await t.store.get(s3, "k")).toMatchObject({ status: "unknown" });
    await t.engine.release({ scope: s3, key: "k", actor: "ops", reason: "the PSP has no such charge" });

    // decided: the log no longer holds them (and a later loss does not bring them back)
    for (const sc of [s, s2]) await t.engine.release({ scope: sc, key: "k", actor: "ops", reason: "the PSP has no such charge" });
    await t.loseData!();
    clock.ms += 1_000;
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "executed" });
    expect(tool.calls).toHaveLength(2);
  });

  it("a key held again as unknown from the log stands for that call: releasing it lets the next call run", async () => {
    const s = scope();
    const failed = await t.engine
      .invoke(charge, async () => Promise.reject(new Error("socket hang up")), { scope: s, key: "k", args: {} })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(OutcomeUnknownError);
    const first = (failed as OutcomeUnknownError).executionId;
    await t.loseData!();
    clock.ms += 2_000;
    const tool = countingTool();
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    const held = await t.store.get(s, "k");
    expect(held).toMatchObject({ status: "unknown", executionId: first });

    // the tool (or an operator) says it did not happen: the call the record stands for is closed in the log
    await t.engine.release({ scope: s, key: "k", token: held!.token, actor: "ops", reason: "the PSP has no such charge" });
    await t.audit.flush();
    expect(await t.db.prisma.execution.findUnique({ where: { id: first } })).toMatchObject({ outcome: "released" });
    clock.ms += 1_000;
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "executed" });
    expect(tool.calls).toHaveLength(1);
  });

  it("keeps the result of a call whose reservation vanished while it ran, and replays it", async () => {
    const s = scope();
    const tool = countingTool();
    const gate = deferred();
    const started = deferred();
    const held = t.engine.invoke(charge, async (args, ctx) => {
      started.resolve();
      await gate.promise;
      return tool.run(args, ctx);
    }, { scope: s, key: "k", args: {} });
    await started.promise;
    await t.loseData!();
    // a retry while it still runs: the log says a call holds the key
    await expect(t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).rejects.toBeInstanceOf(ConflictError);
    gate.resolve();
    expect(await held).toMatchObject({ kind: "executed", lateCompletion: false });
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_1"}' });
    expect(tool.calls).toHaveLength(1);
  });

  it("replays a result an operator resolved, after the store lost it", async () => {
    const s = scope();
    await t.engine.invoke(charge, async () => { throw new AbandonCall(); }, { scope: s, key: "k", args: {} }).catch(() => {});
    clock.ms += charge.leaseMs + 1;
    await t.engine.resolve({ scope: s, key: "k", actor: "ops", reason: "seen in the PSP", result: { chargeId: "ch_psp" }, ttlMs: 60_000 });
    await t.loseData!();
    const tool = countingTool();
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "replayed", body: '{"chargeId":"ch_psp"}' });
    clock.ms += 60_001;
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "k", args: {} })).toMatchObject({ kind: "executed" });
    expect(tool.calls).toHaveLength(1);
  });

  it("runs again when the recorded attempt failed or its result expired", async () => {
    const s = scope();
    let n = 0;
    const failsOnce: RunTool = async () => {
      n++;
      if (n === 1) throw new NotRunError("boom");
      return { body: { n } };
    };
    await t.engine.invoke(charge, failsOnce, { scope: s, key: "f", args: {} }).catch(() => {});
    await t.loseData!();
    expect(await t.engine.invoke(charge, failsOnce, { scope: s, key: "f", args: {} })).toMatchObject({ kind: "executed" });

    const tool = countingTool();
    await t.engine.invoke(charge, tool.run, { scope: s, key: "e", args: {} });
    clock.ms += charge.ttlMs + 1;
    await t.loseData!();
    expect(await t.engine.invoke(charge, tool.run, { scope: s, key: "e", args: {} })).toMatchObject({ kind: "executed" });
    expect(tool.calls).toHaveLength(2);
  });

  it("costs no audit lookup once the store's epoch is older than the TTL, when no call was left unfinished before it", async () => {
    const s = scope();
    const tool = countingTool();
    // touch every bucket once, so each has an epoch; then let the TTL pass
    await Promise.all(Array.from({ length: 200 }, (_, i) => t.engine.invoke(charge, tool.run, { scope: s, key: `warm${i}`, args: {} })));
    clock.ms += charge.ttlMs + 1;
    let lookups = 0;
    const counting = new Proxy(t.audit, {
      get(target, prop, receiver) {
        if (prop === "priorExecution") return (...args: Parameters<PrismaAuditWriter["priorExecution"]>) => (lookups++, target.priorExecution(...args));
        return Reflect.get(target, prop, receiver);
      },
    });
    const warm = new Engine({ store: t.store, audit: counting, now: clock.now });
    // every bucket the next keys land in has an epoch older than the TTL by now
    for (let i = 0; i < 40; i++) await warm.invoke(charge, tool.run, { scope: s, key: `k${i}`, args: {} });
    expect(lookups).toBe(0);
  });
});

describe("engine on a fresh key store", () => {
  it("asks the audit log once per store epoch, and not per call, when there is nothing to recover", async () => {
    const t = await openTestStore("redis");
    const audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    let windowQueries = 0;
    let lookups = 0;
    const counting = new Proxy(audit, {
      get(target, prop, receiver) {
        if (prop === "recoveryWindowEnd") return (ms: number) => (windowQueries++, target.recoveryWindowEnd(ms));
        if (prop === "priorExecution") return (...a: Parameters<PrismaAuditWriter["priorExecution"]>) => (lookups++, target.priorExecution(...a));
        return Reflect.get(target, prop, receiver);
      },
    });
    try {
      let clock = Date.now();
      const engine = new Engine({ store: t.store, audit: counting, now: () => clock });
      const tool = countingTool();
      // in the first seconds of an epoch every key is looked up (a reservation from before may not have its intent yet)
      await engine.invoke(charge, tool.run, { scope: "fresh", key: "first", args: {} });
      expect(lookups).toBe(1);
      clock += 10_000;
      lookups = 0;
      for (let i = 0; i < 50; i++) await engine.invoke(charge, tool.run, { scope: "fresh", key: `k${i}`, args: {} });
      expect(tool.calls).toHaveLength(51);
      expect(lookups).toBe(0);
      expect(windowQueries).toBeGreaterThan(0);
      expect(windowQueries).toBeLessThanOrEqual(16);
    } finally {
      await audit.close();
      await t.cleanup();
    }
  });
});

describe("the audit log as the last guard", () => {
  it("refuses a second execution of a key whose first has no outcome, even when the store lets it through", async () => {
    // a durable SQL store never loses a reservation, so nothing but the log's own index can refuse here
    const t = await openTestStore("pglite");
    const audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    try {
      const engine = new Engine({ store: t.store, audit });
      // what a caller whose reservation the store lost leaves behind: an open intent, no record
      await audit.intent({
        id: randomUUID(), scope: "s", key: "k", tool: charge.name, fingerprint: "f", token: 1, session: null,
        caller: null, fallback: false, startedAt: new Date(), leaseUntil: new Date(Date.now() + 60_000),
      });
      const tool = countingTool();
      await expect(engine.invoke(charge, tool.run, { scope: "s", key: "k", args: {} })).rejects.toBeInstanceOf(ConflictError);
      expect(tool.calls).toHaveLength(0);
      expect(await t.store.get("s", "k")).toBeNull();
      // other keys are not affected, and an outcome frees the key
      expect((await engine.invoke(charge, tool.run, { scope: "s", key: "other", args: {} })).kind).toBe("executed");
    } finally {
      await audit.close();
      await t.cleanup();
    }
  });
});
