import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { AuditWriter, IntentEntry } from "@/lib/idempotency/audit-port";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { LeasePassedError } from "@/lib/idempotency/errors";
import type { RunTool, ToolPolicy } from "@/lib/idempotency/tool";
import { useEngineFixture } from "@/test/support/engine-fixture";

/**
 * A call's intent that becomes durable only after its reservation's lease passed must not run: by
 * then another caller may have taken the key over (stuck policy takeover) and run it.
 */
const charge: ToolPolicy = { name: "payments.charge", kind: "write", ttlMs: 60_000, leaseMs: 5_000, stuckPolicy: "takeover", fallbackTtlMs: null, dedupes: false };

describe.each(["redis", "postgres"] as const)("a slow intent on the %s store", (kind) => {
  const t = useEngineFixture(kind, { startMs: 1_800_000_000_000, audit: { mode: "durable", flushIntervalMs: 5 } });

  function countingTool() {
    const calls: string[] = [];
    const run: RunTool = async (_args, ctx) => {
      calls.push(ctx.executionId ?? "");
      return { body: { chargeId: `ch_${calls.length}` } };
    };
    return { run, calls };
  }

  /** An audit writer (the fixture's unless given) whose intents wait for `release` before they are written. */
  function slowIntents(writer: AuditWriter = t.audit) {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const entered: IntentEntry[] = [];
    const audit = new Proxy(writer, {
      get(target, prop, receiver) {
        if (prop === "intent") {
          return async (entry: IntentEntry) => {
            entered.push(entry);
            await gate;
            return target.intent(entry);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as AuditWriter;
    return { audit, release, entered };
  }

  it("a tool whose call may take up to runTimeoutMs does not start when the rest of its lease is shorter than that", async () => {
    const bounded: ToolPolicy = { ...charge, name: "billing.export", leaseMs: 60_000, runTimeoutMs: 55_000 };
    const scope = `s${randomUUID().slice(0, 8)}`;
    const tool = countingTool();
    const slow = slowIntents();
    const slowEngine = new Engine({ store: t.store, audit: slow.audit, now: t.clock.now });
    const first = slowEngine.invoke(bounded, tool.run, { scope, key: "export-7", args: {} });
    await expect.poll(() => slow.entered.length).toBe(1);
    // the intent took 6 s: a 55 s call started now could still be running when the lease ends at 60 s
    t.clock.ms += 6_000;
    slow.release();
    await expect(first).rejects.toBeInstanceOf(LeasePassedError);
    expect(tool.calls).toHaveLength(0);
    expect(await t.store.get(scope, "export-7")).toBeNull();
    // the retry, written in time, runs once
    expect((await t.engine.invoke(bounded, tool.run, { scope, key: "export-7", args: {} })).kind).toBe("executed");
    expect(tool.calls).toHaveLength(1);
  });

  // Where the slow intent lands depends on whether the outcome of the call that took the key over is
  // in the database yet: both orders, each made certain.
  it("does not run when its intent commits after the lease passed, the taker's outcome still queued: refused as a conflict, never written", async () => {
    const scope = `s${randomUUID().slice(0, 8)}`;
    const tool = countingTool();
    // one writer for both calls, which writes its queue only when asked: the taker's outcome waits in it
    const writer = new PrismaAuditWriter(t.db.prisma, { mode: "durable", flushIntervalMs: 3_600_000, execute: t.db.execute, query: t.db.query });
    try {
      const slow = slowIntents(writer);
      const slowEngine = new Engine({ store: t.store, audit: slow.audit, now: t.clock.now });
      const taker = new Engine({ store: t.store, audit: writer, now: t.clock.now });

      const first = slowEngine.invoke(charge, tool.run, { scope, key: "order-42", args: { amountCents: 100 } });
      await expect.poll(() => slow.entered.length).toBe(1);
      // the lease passes while the intent is on its way; another caller takes the key over and runs it
      t.clock.ms += charge.leaseMs + 1;
      const second = await taker.invoke(charge, tool.run, { scope, key: "order-42", args: { amountCents: 100 } });
      expect(second.kind).toBe("executed");
      expect(tool.calls).toHaveLength(1);

      slow.release();
      const refused = await first.then(
        () => null,
        (err: unknown) => err,
      );
      // its intent meets the second call's execution in the log, which ran: refused (a conflict: the
      // retry is answered from the key), never written, never run
      expect(refused).toMatchObject({ code: "conflict" });
      expect(tool.calls).toHaveLength(1);

      await writer.flush();
      expect(await t.db.prisma.execution.findUnique({ where: { id: slow.entered[0].id } })).toBeNull();
      expect(await t.store.get(scope, "order-42")).toMatchObject({ status: "done" });
      const replay = await t.engine.invoke(charge, tool.run, { scope, key: "order-42", args: { amountCents: 100 } });
      expect(replay.kind).toBe("replayed");
      expect(tool.calls).toHaveLength(1);
    } finally {
      await writer.close();
    }
  });

  it("does not run when its intent commits after the lease passed, the taker's outcome written: its intent is closed as not run", async () => {
    const scope = `s${randomUUID().slice(0, 8)}`;
    const tool = countingTool();
    const slow = slowIntents();
    const slowEngine = new Engine({ store: t.store, audit: slow.audit, now: t.clock.now });

    const first = slowEngine.invoke(charge, tool.run, { scope, key: "order-44", args: { amountCents: 100 } });
    await expect.poll(() => slow.entered.length).toBe(1);
    t.clock.ms += charge.leaseMs + 1;
    const second = await t.engine.invoke(charge, tool.run, { scope, key: "order-44", args: { amountCents: 100 } });
    expect(second.kind).toBe("executed");
    await t.audit.flush();

    slow.release();
    // nothing blocks the intent in the log now; the engine sees the lease passed and does not run
    await expect(first).rejects.toBeInstanceOf(LeasePassedError);
    expect(tool.calls).toHaveLength(1);
    await t.audit.flush();
    expect(await t.db.prisma.execution.findUnique({ where: { id: slow.entered[0].id } })).toMatchObject({ outcome: "failed" });
    expect(await t.store.get(scope, "order-44")).toMatchObject({ status: "done" });
    const replay = await t.engine.invoke(charge, tool.run, { scope, key: "order-44", args: { amountCents: 100 } });
    expect(replay.kind).toBe("replayed");
    expect(tool.calls).toHaveLength(1);
  });

  it("gives the key back when nobody took it over, so the retry runs once", async () => {
    const scope = `s${randomUUID().slice(0, 8)}`;
    const tool = countingTool();
    const slow = slowIntents();
    const slowEngine = new Engine({ store: t.store, audit: slow.audit, now: t.clock.now });

    const first = slowEngine.invoke(charge, tool.run, { scope, key: "order-43", args: {} });
    await expect.poll(() => slow.entered.length).toBe(1);
    t.clock.ms += charge.leaseMs;
    slow.release();
    await expect(first).rejects.toBeInstanceOf(LeasePassedError);
    expect(tool.calls).toHaveLength(0);
    expect(await t.store.get(scope, "order-43")).toBeNull();

    const retry = await t.engine.invoke(charge, tool.run, { scope, key: "order-43", args: {} });
    expect(retry.kind).toBe("executed");
    expect(tool.calls).toHaveLength(1);
    await t.audit.flush();
    const rows = await t.db.prisma.execution.findMany({ where: { scope, key: "order-43" }, orderBy: { startedAt: "asc" } });
    expect(rows.map((r) => r.outcome)).toEqual(["failed", "succeeded"]);
  });
});
